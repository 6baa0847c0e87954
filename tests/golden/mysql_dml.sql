-- claim [500]
SELECT c.`id`, c.`aggregate_id` FROM `outbox` AS c WHERE c.`status` = 0 AND c.`next_retry_at` IS NULL AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 0 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 1 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 3 ORDER BY e.`id` LIMIT 1), c.`id`) ORDER BY c.`id` LIMIT %s FOR UPDATE SKIP LOCKED;

-- claim [-60000000, 500]
SELECT c.`id`, c.`aggregate_id` FROM `outbox` AS c WHERE ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3)) OR (c.`status` = 1 AND c.`claimed_at` < TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)) AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3)))) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 0 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 1 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 3 ORDER BY e.`id` LIMIT 1), c.`id`) ORDER BY c.`id` LIMIT %s FOR UPDATE SKIP LOCKED;

-- claim [1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2]
SELECT c.`id` FROM `outbox` AS c WHERE c.`id` IN (%s, %s, %s, %s) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 0 AND NOT e.`id` IN (%s, %s, %s, %s) ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 1 AND NOT e.`id` IN (%s, %s, %s, %s) ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 3 AND NOT e.`id` IN (%s, %s, %s, %s) ORDER BY e.`id` LIMIT 1), c.`id`);

-- claim [1, 1, 2, 2]
UPDATE `outbox` AS o SET o.`attempts` = o.`attempts` + CASE WHEN o.`status` = 1 THEN 1 ELSE 0 END, o.`status` = 1, o.`claimed_at` = UTC_TIMESTAMP(3) WHERE o.`id` IN (%s, %s, %s, %s);

-- claim [1, 1, 2, 2]
SELECT o.`id`, o.`message_id`, o.`topic`, o.`aggregate_type`, o.`aggregate_id`, o.`partition_key`, o.`payload`, o.`headers`, o.`trace_id`, o.`attempts`, o.`claimed_at`, o.`created_at`, o.`schema_version` FROM `outbox` AS o WHERE o.`id` IN (%s, %s, %s, %s) ORDER BY o.`id`;

-- claim_chained [50]
SELECT c.`id`, c.`aggregate_id` FROM `outbox` AS c WHERE c.`status` = 0 AND c.`next_retry_at` IS NULL AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 0 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 1 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 3 ORDER BY e.`id` LIMIT 1), c.`id`) ORDER BY c.`id` LIMIT %s FOR UPDATE SKIP LOCKED;

-- claim_chained [-60000000, 50]
SELECT c.`id`, c.`aggregate_id` FROM `outbox` AS c WHERE ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3)) OR (c.`status` = 1 AND c.`claimed_at` < TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)) AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3)))) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 0 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 1 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 3 ORDER BY e.`id` LIMIT 1), c.`id`) ORDER BY c.`id` LIMIT %s FOR UPDATE SKIP LOCKED;

-- claim_chained [1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2]
SELECT c.`id` FROM `outbox` AS c WHERE c.`id` IN (%s, %s, %s, %s) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 0 AND NOT e.`id` IN (%s, %s, %s, %s) ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 1 AND NOT e.`id` IN (%s, %s, %s, %s) ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 3 AND NOT e.`id` IN (%s, %s, %s, %s) ORDER BY e.`id` LIMIT 1), c.`id`);

-- claim_chained [-60000000, 'a', 0, 1, 99, -60000000, 'a', 1, 1, 99, -60000000, 'a', 3, 1, 99, -60000000, 'b', 0, 2, 99, -60000000, 'b', 1, 2, 99, -60000000, 'b', 3, 2, 99]
(SELECT c.`id`, c.`aggregate_id`, CASE WHEN ((c.`status` = 0 AND c.`next_retry_at` IS NULL) OR ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3)) OR (c.`status` = 1 AND c.`claimed_at` < TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)) AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))))) THEN 1 ELSE 0 END FROM `outbox` AS c WHERE c.`aggregate_id` = %s AND c.`status` = %s AND c.`id` > %s ORDER BY c.`id` LIMIT %s) UNION ALL (SELECT c.`id`, c.`aggregate_id`, CASE WHEN ((c.`status` = 0 AND c.`next_retry_at` IS NULL) OR ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3)) OR (c.`status` = 1 AND c.`claimed_at` < TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)) AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))))) THEN 1 ELSE 0 END FROM `outbox` AS c WHERE c.`aggregate_id` = %s AND c.`status` = %s AND c.`id` > %s ORDER BY c.`id` LIMIT %s) UNION ALL (SELECT c.`id`, c.`aggregate_id`, CASE WHEN ((c.`status` = 0 AND c.`next_retry_at` IS NULL) OR ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3)) OR (c.`status` = 1 AND c.`claimed_at` < TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)) AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))))) THEN 1 ELSE 0 END FROM `outbox` AS c WHERE c.`aggregate_id` = %s AND c.`status` = %s AND c.`id` > %s ORDER BY c.`id` LIMIT %s) UNION ALL (SELECT c.`id`, c.`aggregate_id`, CASE WHEN ((c.`status` = 0 AND c.`next_retry_at` IS NULL) OR ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3)) OR (c.`status` = 1 AND c.`claimed_at` < TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)) AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))))) THEN 1 ELSE 0 END FROM `outbox` AS c WHERE c.`aggregate_id` = %s AND c.`status` = %s AND c.`id` > %s ORDER BY c.`id` LIMIT %s) UNION ALL (SELECT c.`id`, c.`aggregate_id`, CASE WHEN ((c.`status` = 0 AND c.`next_retry_at` IS NULL) OR ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3)) OR (c.`status` = 1 AND c.`claimed_at` < TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)) AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))))) THEN 1 ELSE 0 END FROM `outbox` AS c WHERE c.`aggregate_id` = %s AND c.`status` = %s AND c.`id` > %s ORDER BY c.`id` LIMIT %s) UNION ALL (SELECT c.`id`, c.`aggregate_id`, CASE WHEN ((c.`status` = 0 AND c.`next_retry_at` IS NULL) OR ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3)) OR (c.`status` = 1 AND c.`claimed_at` < TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)) AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))))) THEN 1 ELSE 0 END FROM `outbox` AS c WHERE c.`aggregate_id` = %s AND c.`status` = %s AND c.`id` > %s ORDER BY c.`id` LIMIT %s);

-- claim_chained [1, 1, 2, 2, 3]
UPDATE `outbox` AS o SET o.`attempts` = o.`attempts` + CASE WHEN o.`status` = 1 THEN 1 ELSE 0 END, o.`status` = 1, o.`claimed_at` = UTC_TIMESTAMP(3) WHERE o.`id` IN (%s, %s, %s, %s, %s);

-- claim_chained [1, 1, 2, 2, 3]
SELECT o.`id`, o.`message_id`, o.`topic`, o.`aggregate_type`, o.`aggregate_id`, o.`partition_key`, o.`payload`, o.`headers`, o.`trace_id`, o.`attempts`, o.`claimed_at`, o.`created_at`, o.`schema_version` FROM `outbox` AS o WHERE o.`id` IN (%s, %s, %s, %s, %s) ORDER BY o.`id`;

-- ack [1, 2, 3, '2026-11-21 12:00:00.123']
UPDATE `outbox` SET `status` = 2, `processed_at` = UTC_TIMESTAMP(3) WHERE `id` IN (%s, %s, %s) AND `status` = 1 AND `claimed_at` = %s;

-- fail [1500000, 'nack', 4, '2026-11-21 12:00:00.123']
UPDATE `outbox` SET `attempts` = `attempts` + 1, `status` = 3, `next_retry_at` = TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)), `last_error` = %s WHERE `id` IN (%s) AND `status` = 1 AND `claimed_at` = %s;

-- bury [1, 'poison', 5, '2026-11-21 12:00:00.123']
UPDATE `outbox` SET `attempts` = `attempts` + %s, `status` = 4, `processed_at` = UTC_TIMESTAMP(3), `next_retry_at` = NULL, `last_error` = %s WHERE `id` IN (%s) AND `status` = 1 AND `claimed_at` = %s;

-- release [6, 7, '2026-11-21 12:00:00.123']
UPDATE `outbox` SET `status` = 0, `claimed_at` = NULL, `next_retry_at` = NULL WHERE `id` IN (%s, %s) AND `status` = 1 AND `claimed_at` = %s;

-- renew [8, 9, '2026-11-21 12:00:00.123']
SELECT c.`id` FROM `outbox` AS c WHERE `id` IN (%s, %s) AND `status` = 1 AND `claimed_at` = %s FOR UPDATE SKIP LOCKED;

-- renew [60000000, 1, 2, '2026-11-21 12:00:00.123']
UPDATE `outbox` SET `next_retry_at` = TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3)) WHERE `id` IN (%s, %s) AND `status` = 1 AND `claimed_at` = %s;

-- purge ['2026-11-14 00:00:00', 1000]
DELETE FROM `outbox` WHERE `status` IN (2, 4) AND `processed_at` < %s ORDER BY `status`, `processed_at`, `id` LIMIT %s;

-- insert []
INSERT INTO `outbox` (`message_id`, `topic`, `aggregate_type`, `aggregate_id`, `partition_key`, `payload`, `headers`, `trace_id`) VALUES (%s, %s, %s, %s, %s, %s, %s, %s), (%s, %s, %s, %s, %s, %s, %s, %s);

