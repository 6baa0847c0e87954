-- claim [500, -60000, 500, 500]
WITH fresh AS (SELECT c."id", c."aggregate_id" FROM "outbox" AS c WHERE c."status" = 0 AND c."next_retry_at" IS NULL AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL ORDER BY c."status", c."next_retry_at", c."id" LIMIT %s FOR UPDATE OF c SKIP LOCKED), overdue AS (SELECT c."id", c."aggregate_id" FROM "outbox" AS c WHERE ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp()) OR (c."status" = 1 AND c."claimed_at" < (statement_timestamp() + %s * INTERVAL '1 millisecond') AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp()))) AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL ORDER BY c."id" LIMIT %s FOR UPDATE OF c SKIP LOCKED), picked AS (SELECT "id" FROM fresh UNION ALL SELECT "id" FROM overdue ORDER BY 1 LIMIT %s) UPDATE "outbox" AS o SET "attempts" = o."attempts" + CASE WHEN o."status" = 1 THEN 1 ELSE 0 END, "status" = 1, "claimed_at" = statement_timestamp() WHERE o."id" = ANY(ARRAY(SELECT "id" FROM picked)) RETURNING o."id", o."message_id", o."topic", o."aggregate_type", o."aggregate_id", o."partition_key", o."payload"::text, o."headers"::text, o."trace_id", o."attempts", o."claimed_at"::text, o."created_at", o."schema_version";

-- claim_chained [50, -60000, 50, 50, -60000, 100, 500, 500]
WITH fresh AS (SELECT c."id", c."aggregate_id" FROM "outbox" AS c WHERE c."status" = 0 AND c."next_retry_at" IS NULL AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL ORDER BY c."status", c."next_retry_at", c."id" LIMIT %s FOR UPDATE OF c SKIP LOCKED), overdue AS (SELECT c."id", c."aggregate_id" FROM "outbox" AS c WHERE ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp()) OR (c."status" = 1 AND c."claimed_at" < (statement_timestamp() + %s * INTERVAL '1 millisecond') AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp()))) AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL ORDER BY c."id" LIMIT %s FOR UPDATE OF c SKIP LOCKED), heads AS (SELECT "id", "aggregate_id" FROM fresh UNION ALL SELECT "id", "aggregate_id" FROM overdue ORDER BY 1 LIMIT %s), picked AS (SELECT "id" FROM heads UNION ALL SELECT chain."id" FROM heads AS h CROSS JOIN LATERAL (SELECT r."id" FROM (SELECT c."id", MIN(CASE WHEN ((c."status" = 0 AND c."next_retry_at" IS NULL) OR ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp()) OR (c."status" = 1 AND c."claimed_at" < (statement_timestamp() + %s * INTERVAL '1 millisecond') AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())))) THEN 1 ELSE 0 END) OVER (ORDER BY c."id") AS unbroken FROM "outbox" AS c WHERE c."aggregate_id" = h."aggregate_id" AND c."status" IN (0, 1, 3) AND c."id" > h."id" ORDER BY c."id" LIMIT (SELECT LEAST(%s, (%s + GREATEST(COUNT(*), 1) - 1) / GREATEST(COUNT(*), 1)) - 1 FROM heads)) AS r WHERE r.unbroken = 1) AS chain ORDER BY 1 LIMIT %s) UPDATE "outbox" AS o SET "attempts" = o."attempts" + CASE WHEN o."status" = 1 THEN 1 ELSE 0 END, "status" = 1, "claimed_at" = statement_timestamp() WHERE o."id" = ANY(ARRAY(SELECT "id" FROM picked)) RETURNING o."id", o."message_id", o."topic", o."aggregate_type", o."aggregate_id", o."partition_key", o."payload"::text, o."headers"::text, o."trace_id", o."attempts", o."claimed_at"::text, o."created_at", o."schema_version";

-- ack [[1, 2, 3], '2026-11-21 12:00:00.123']
UPDATE "outbox" SET "status" = 2, "processed_at" = statement_timestamp() WHERE "id" = ANY(%s) AND "status" = 1 AND "claimed_at" = %s::timestamptz;

-- fail [1500, 'nack', [4], '2026-11-21 12:00:00.123']
UPDATE "outbox" SET "attempts" = "attempts" + 1, "status" = 3, "next_retry_at" = (statement_timestamp() + %s * INTERVAL '1 millisecond'), "last_error" = %s WHERE "id" = ANY(%s) AND "status" = 1 AND "claimed_at" = %s::timestamptz;

-- bury [1, 'poison', [5], '2026-11-21 12:00:00.123']
UPDATE "outbox" SET "attempts" = "attempts" + %s, "status" = 4, "processed_at" = statement_timestamp(), "next_retry_at" = NULL, "last_error" = %s WHERE "id" = ANY(%s) AND "status" = 1 AND "claimed_at" = %s::timestamptz;

-- release [[6, 7], '2026-11-21 12:00:00.123']
UPDATE "outbox" SET "status" = 0, "claimed_at" = NULL, "next_retry_at" = NULL WHERE "id" = ANY(%s) AND "status" = 1 AND "claimed_at" = %s::timestamptz;

-- renew [[8, 9], '2026-11-21 12:00:00.123']
SELECT c."id" FROM "outbox" AS c WHERE "id" = ANY(%s) AND "status" = 1 AND "claimed_at" = %s::timestamptz FOR UPDATE OF c SKIP LOCKED;

-- renew [60000, [1, 2], '2026-11-21 12:00:00.123']
UPDATE "outbox" SET "next_retry_at" = (statement_timestamp() + %s * INTERVAL '1 millisecond') WHERE "id" = ANY(%s) AND "status" = 1 AND "claimed_at" = %s::timestamptz;

-- purge ['2026-11-14 00:00:00', 1000]
DELETE FROM "outbox" WHERE "id" IN (SELECT "id" FROM "outbox" WHERE "status" IN (2, 4) AND "processed_at" < %s::timestamptz LIMIT %s FOR UPDATE SKIP LOCKED);

-- insert []
WITH inserted AS (INSERT INTO "outbox" ("message_id", "topic", "aggregate_type", "aggregate_id", "partition_key", "payload", "headers", "trace_id") VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s), (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s) RETURNING 1) SELECT pg_notify(%s, '') FROM (SELECT 1 FROM inserted LIMIT 1) AS one;

