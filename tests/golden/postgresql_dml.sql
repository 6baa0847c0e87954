-- ack [[1, 2, 3]]
UPDATE "outbox" SET "status" = 2, "processed_at" = statement_timestamp() WHERE "id" = ANY(%s) AND "status" IN (0, 3);

-- fail [4, 1500, 10, 3000, 4, 'nack', 10, 'unroutable', [4, 10], 4, 0, 10, 2]
UPDATE "outbox" SET "attempts" = "attempts" + 1, "status" = 3, "next_retry_at" = CASE "id" WHEN %s THEN (statement_timestamp() + %s * INTERVAL '1 millisecond') WHEN %s THEN (statement_timestamp() + %s * INTERVAL '1 millisecond') END, "last_error" = CASE "id" WHEN %s THEN %s WHEN %s THEN %s END WHERE "id" = ANY(%s) AND "status" IN (0, 3) AND "attempts" = CASE "id" WHEN %s THEN %s WHEN %s THEN %s END;

-- bury [5, 1, 11, 0, 5, 'poison', 11, 'too large', [5, 11], 5, 4, 11, 0]
UPDATE "outbox" SET "attempts" = "attempts" + (CASE "id" WHEN %s THEN %s WHEN %s THEN %s END), "status" = 4, "processed_at" = statement_timestamp(), "next_retry_at" = NULL, "last_error" = CASE "id" WHEN %s THEN %s WHEN %s THEN %s END WHERE "id" = ANY(%s) AND "status" IN (0, 3) AND "attempts" = CASE "id" WHEN %s THEN %s WHEN %s THEN %s END;

-- purge ['2026-11-14 00:00:00', 1000]
DELETE FROM "outbox" WHERE "id" IN (SELECT "id" FROM "outbox" WHERE "status" IN (2, 4) AND "processed_at" < %s::timestamptz LIMIT %s FOR UPDATE SKIP LOCKED);

-- insert []
WITH inserted AS (INSERT INTO "outbox" ("message_id", "topic", "aggregate_type", "aggregate_id", "partition_key", "payload", "headers", "trace_id", "bucket") VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s), (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s) RETURNING "bucket") SELECT pg_notify(%s, CASE WHEN COUNT("bucket") = COUNT(*) THEN string_agg(DISTINCT "bucket"::text, ',') ELSE '' END) FROM inserted HAVING COUNT(*) > 0;

-- unbucketed [1000]
SELECT f."id", f."aggregate_id" FROM "outbox" AS f WHERE f."bucket" IS NULL AND f."status" = 0 AND f."next_retry_at" IS NULL ORDER BY f."bucket", f."id" LIMIT %s;

-- fill_bucket ['agg-7', 214, 'agg-9', 3, 'agg-7', 'agg-9']
UPDATE "outbox" SET "bucket" = CASE "aggregate_id" WHEN %s THEN %s WHEN %s THEN %s END WHERE "aggregate_id" IN (%s, %s) AND "status" IN (0, 1, 3) AND "status" = 0 AND "next_retry_at" IS NULL AND "bucket" IS NULL;

-- seed_buckets [256]
INSERT INTO "outbox_buckets" ("bucket") SELECT h.d * 16 + l.d FROM (SELECT 0 AS d UNION ALL SELECT 1 AS d UNION ALL SELECT 2 AS d UNION ALL SELECT 3 AS d UNION ALL SELECT 4 AS d UNION ALL SELECT 5 AS d UNION ALL SELECT 6 AS d UNION ALL SELECT 7 AS d UNION ALL SELECT 8 AS d UNION ALL SELECT 9 AS d UNION ALL SELECT 10 AS d UNION ALL SELECT 11 AS d UNION ALL SELECT 12 AS d UNION ALL SELECT 13 AS d UNION ALL SELECT 14 AS d UNION ALL SELECT 15 AS d) h CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 AS d UNION ALL SELECT 2 AS d UNION ALL SELECT 3 AS d UNION ALL SELECT 4 AS d UNION ALL SELECT 5 AS d UNION ALL SELECT 6 AS d UNION ALL SELECT 7 AS d UNION ALL SELECT 8 AS d UNION ALL SELECT 9 AS d UNION ALL SELECT 10 AS d UNION ALL SELECT 11 AS d UNION ALL SELECT 12 AS d UNION ALL SELECT 13 AS d UNION ALL SELECT 14 AS d UNION ALL SELECT 15 AS d) l WHERE h.d * 16 + l.d < %s AND NOT EXISTS (SELECT 1 FROM "outbox_buckets" e WHERE e."bucket" = h.d * 16 + l.d);

-- take_buckets ['relay-a', 60000, 3, 7]
UPDATE "outbox_buckets" SET "owner" = %s, "epoch" = "epoch" + 1, "expires_at" = (statement_timestamp() + %s * INTERVAL '1 millisecond') WHERE "bucket" IN (%s, %s) AND ("owner" IS NULL OR "expires_at" IS NULL OR "expires_at" <= statement_timestamp());

-- renew_buckets [60000, 'relay-a']
UPDATE "outbox_buckets" SET "expires_at" = (statement_timestamp() + %s * INTERVAL '1 millisecond') WHERE "owner" = %s AND "expires_at" > statement_timestamp();

-- release_buckets ['relay-a', 7]
UPDATE "outbox_buckets" SET "owner" = NULL, "expires_at" = NULL WHERE "owner" = %s AND "bucket" IN (%s);

-- release_all_buckets ['relay-a']
UPDATE "outbox_buckets" SET "owner" = NULL, "expires_at" = NULL WHERE "owner" = %s;

-- held_buckets ['relay-a']
SELECT "bucket", "epoch" FROM "outbox_buckets" WHERE "owner" = %s AND "expires_at" > statement_timestamp() ORDER BY "bucket";

-- bucket_holders []
SELECT "bucket", "owner", "epoch", CASE WHEN "expires_at" > statement_timestamp() THEN 1 ELSE 0 END FROM "outbox_buckets" ORDER BY "bucket";

-- record_batch ['relay-a', 7, 3, '1,1,3']
INSERT INTO "outbox_in_flight" ("relay", "batch", "event_count", "events") VALUES (%s, %s, %s, %s);

-- forget_whole_batch ['relay-a', 7]
DELETE FROM "outbox_in_flight" WHERE "relay" = %s AND "batch" = %s AND "taken" = 0 RETURNING "taken";

-- lock_batch ['relay-a', 7]
UPDATE "outbox_in_flight" SET "taken" = "taken" WHERE "relay" = %s AND "batch" = %s;

-- batch_events ['relay-a', 7]
SELECT "events" FROM "outbox_in_flight" WHERE "relay" = %s AND "batch" = %s;

-- forget_batch ['relay-a', 7]
DELETE FROM "outbox_in_flight" WHERE "relay" = %s AND "batch" = %s;

-- batches_in_flight []
SELECT "relay", "batch", "claimed_at", "taken", "events" FROM "outbox_in_flight" ORDER BY "claimed_at", "id";

-- relay_batches_in_flight ['relay-a']
SELECT "relay", "batch", "claimed_at", "taken", "events" FROM "outbox_in_flight" WHERE "relay" = %s ORDER BY "claimed_at", "id";

-- batch_rows_in_buckets [[1, 2, 3], 7, 9]
SELECT "id" FROM "outbox" WHERE "id" = ANY(%s) AND "bucket" IN (%s, %s);

-- shrink_batch ['3', 1, 2, 'relay-a', 7]
UPDATE "outbox_in_flight" SET "events" = %s, "event_count" = %s, "taken" = "taken" + %s WHERE "relay" = %s AND "batch" = %s;

-- shrink_batch_to_nothing ['', 0, 3, 'relay-a', 7]
UPDATE "outbox_in_flight" SET "events" = %s, "event_count" = %s, "taken" = "taken" + %s WHERE "relay" = %s AND "batch" = %s;

-- count_attempt [[1, 2]]
UPDATE "outbox" SET "attempts" = "attempts" + 1 WHERE "id" = ANY(%s) AND "status" IN (0, 3);

-- forget_emptied_batches [-86400000]
DELETE FROM "outbox_in_flight" WHERE "event_count" = 0 AND "taken" > 0 AND "claimed_at" < (statement_timestamp() + %s * INTERVAL '1 millisecond');

