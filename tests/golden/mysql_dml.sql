-- ack [1, 2, 3, '2026-11-21 12:00:00.123']
UPDATE `outbox` SET `status` = 2, `processed_at` = UTC_TIMESTAMP(3) WHERE `id` IN (%s, %s, %s) AND `status` = 1 AND `claimed_at` = %s;

-- fail [4, 1500000, 10, 3000000, 4, 'nack', 10, 'unroutable', 4, 10, '2026-11-21 12:00:00.123']
UPDATE `outbox` SET `attempts` = `attempts` + 1, `status` = 3, `next_retry_at` = CASE `id` WHEN %s THEN TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)) WHEN %s THEN TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)) END, `last_error` = CASE `id` WHEN %s THEN %s WHEN %s THEN %s END WHERE `id` IN (%s, %s) AND `status` = 1 AND `claimed_at` = %s;

-- bury [5, 1, 11, 0, 5, 'poison', 11, 'too large', 5, 11, '2026-11-21 12:00:00.123']
UPDATE `outbox` SET `attempts` = `attempts` + (CASE `id` WHEN %s THEN %s WHEN %s THEN %s END), `status` = 4, `processed_at` = UTC_TIMESTAMP(3), `next_retry_at` = NULL, `last_error` = CASE `id` WHEN %s THEN %s WHEN %s THEN %s END WHERE `id` IN (%s, %s) AND `status` = 1 AND `claimed_at` = %s;

-- release [6, 7, '2026-11-21 12:00:00.123']
UPDATE `outbox` SET `status` = 0, `claimed_at` = NULL, `next_retry_at` = NULL WHERE `id` IN (%s, %s) AND `status` = 1 AND `claimed_at` = %s;

-- renew [8, 9, '2026-11-21 12:00:00.123']
SELECT c.`id` FROM `outbox` AS c WHERE `id` IN (%s, %s) AND `status` = 1 AND `claimed_at` = %s FOR UPDATE SKIP LOCKED;

-- renew [60000000, 1, 2, '2026-11-21 12:00:00.123']
UPDATE `outbox` SET `next_retry_at` = TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)) WHERE `id` IN (%s, %s) AND `status` = 1 AND `claimed_at` = %s;

-- purge ['2026-11-14 00:00:00', 1000]
DELETE FROM `outbox` WHERE `status` IN (2, 4) AND `processed_at` < %s ORDER BY `status`, `processed_at`, `id` LIMIT %s;

-- insert []
INSERT INTO `outbox` (`message_id`, `topic`, `aggregate_type`, `aggregate_id`, `partition_key`, `payload`, `headers`, `trace_id`, `bucket`) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s), (%s, %s, %s, %s, %s, %s, %s, %s, %s);

-- unbucketed [1000]
SELECT f.`id`, f.`aggregate_id` FROM `outbox` AS f FORCE INDEX (`IX_outbox_bucket_fresh`) WHERE f.`bucket` IS NULL AND f.`status` = 0 AND f.`next_retry_at` IS NULL ORDER BY f.`id` LIMIT %s;

-- fill_bucket ['agg-7', 214, 'agg-9', 3, 'agg-7', 'agg-9']
UPDATE `outbox` SET `bucket` = CASE `aggregate_id` WHEN %s THEN %s WHEN %s THEN %s END WHERE `aggregate_id` IN (%s, %s) AND `status` IN (0, 1, 3) AND `status` = 0 AND `next_retry_at` IS NULL AND `bucket` IS NULL;

