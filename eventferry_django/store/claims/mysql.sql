-- The claim on mysql, statement by statement, for the outbox named "outbox":
-- what eventferry_django/store/mysql.py (MysqlClaim) sends. Each
-- %(name)s is a value bound by name (see eventferry_django/store/claim.py).
-- Written by the code and kept equal to it by tests/test_claim_sql.py: never
-- edit it; after a change to the claim run
-- EVENTFERRY_UPDATE_GOLDEN=1 pytest tests/test_claim_sql.py, and review the diff.

-- name: oldest_window
SELECT f.`id`, f.`aggregate_id` FROM `outbox` AS f FORCE INDEX (`IX_outbox_claim_ready`) WHERE f.`status` = 0 AND f.`next_retry_at` IS NULL ORDER BY f.`id` LIMIT %(window)s;

-- name: bucket_windows
(SELECT f.`id`, f.`aggregate_id` FROM `outbox` AS f FORCE INDEX (`IX_outbox_bucket_fresh`) WHERE f.`bucket` = %(bucket)s AND f.`status` = 0 AND f.`next_retry_at` IS NULL ORDER BY f.`id` LIMIT %(window)s);

-- name: unhindered
SELECT (NOT EXISTS (SELECT 1 FROM `outbox` AS x WHERE x.`status` IN (1, 3)) AND NOT EXISTS (SELECT 1 FROM `outbox` AS x WHERE x.`status` = 0 AND x.`next_retry_at` IS NOT NULL));

-- name: unhindered_by_bucket
SELECT (NOT EXISTS (SELECT 1 FROM `outbox` AS x WHERE x.`status` IN (1, 3)) AND NOT EXISTS (SELECT 1 FROM `outbox` AS x WHERE x.`status` = 0 AND x.`next_retry_at` IS NOT NULL) AND NOT EXISTS (SELECT 1 FROM `outbox` AS x WHERE x.`bucket` IS NULL AND x.`status` = 0 AND x.`next_retry_at` IS NULL));

-- name: fresh_heads
SELECT c.`id`, c.`aggregate_id` FROM `outbox` AS c WHERE c.`id` IN (%(id)s) AND c.`status` = 0 AND c.`next_retry_at` IS NULL AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 0 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 1 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 3 ORDER BY e.`id` LIMIT 1), c.`id`) ORDER BY c.`id` LIMIT %(heads)s;

-- name: overdue_heads
SELECT c.`id`, c.`aggregate_id` FROM `outbox` AS c WHERE ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3))) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 0 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 1 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 3 ORDER BY e.`id` LIMIT 1), c.`id`) ORDER BY c.`id` LIMIT %(heads)s;

-- name: overdue_heads_by_bucket
SELECT c.`id`, c.`aggregate_id` FROM `outbox` AS c WHERE ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3))) AND c.`bucket` IN (%(bucket)s) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 0 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 1 ORDER BY e.`id` LIMIT 1), c.`id`) AND c.`id` <= COALESCE((SELECT e.`id` FROM `outbox` AS e FORCE INDEX (`IX_outbox_agg_open`) WHERE e.`aggregate_id` = c.`aggregate_id` AND e.`status` = 3 ORDER BY e.`id` LIMIT 1), c.`id`) ORDER BY c.`id` LIMIT %(heads)s;

-- name: chains
(SELECT c.`id`, c.`aggregate_id`, CASE WHEN ((c.`status` = 0 AND c.`next_retry_at` IS NULL) OR ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3)))) THEN 1 ELSE 0 END FROM `outbox` AS c WHERE c.`aggregate_id` = %(aggregate)s AND c.`status` = %(status)s AND c.`id` > %(head)s ORDER BY c.`id` LIMIT %(share)s)
UNION ALL
(SELECT c.`id`, c.`aggregate_id`, CASE WHEN ((c.`status` = 0 AND c.`next_retry_at` IS NULL) OR ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3)))) THEN 1 ELSE 0 END FROM `outbox` AS c WHERE c.`aggregate_id` = %(aggregate)s AND c.`status` = %(status)s AND c.`id` > %(head)s ORDER BY c.`id` LIMIT %(share)s)
UNION ALL
(SELECT c.`id`, c.`aggregate_id`, CASE WHEN ((c.`status` = 0 AND c.`next_retry_at` IS NULL) OR ((c.`status` = 3 AND (c.`next_retry_at` IS NULL OR c.`next_retry_at` <= UTC_TIMESTAMP(3))) OR (c.`status` = 0 AND c.`next_retry_at` <= UTC_TIMESTAMP(3)))) THEN 1 ELSE 0 END FROM `outbox` AS c WHERE c.`aggregate_id` = %(aggregate)s AND c.`status` = %(status)s AND c.`id` > %(head)s ORDER BY c.`id` LIMIT %(share)s);

-- name: read_back
SELECT o.`id`, o.`message_id`, o.`topic`, o.`aggregate_type`, o.`aggregate_id`, o.`partition_key`, o.`payload`, o.`headers`, o.`trace_id`, o.`attempts`, o.`created_at`, o.`schema_version` FROM `outbox` AS o WHERE o.`id` IN (%(id)s) ORDER BY o.`id`;
