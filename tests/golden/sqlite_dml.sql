-- claim ['-60.000 seconds', 500]
UPDATE "outbox" AS o SET "attempts" = o."attempts" + CASE WHEN o."status" = 1 THEN 1 ELSE 0 END, "status" = 1, "claimed_at" = strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now') WHERE o."id" IN (SELECT c."id" FROM "outbox" AS c WHERE ((c."status" = 0 AND c."next_retry_at" IS NULL) OR ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'))) OR (c."status" = 0 AND c."next_retry_at" <= strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')) OR (c."status" = 1 AND c."claimed_at" < strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', %s) AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'))))) AND NOT EXISTS (SELECT 1 FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") ORDER BY c."id" LIMIT %s) RETURNING "id", "message_id", "topic", "aggregate_type", "aggregate_id", "partition_key", "payload", "headers", "trace_id", "attempts", CAST("claimed_at" AS TEXT), "created_at", "schema_version";

-- claim_chained ['-60.000 seconds', 100, 500]
UPDATE "outbox" AS o SET "attempts" = o."attempts" + CASE WHEN o."status" = 1 THEN 1 ELSE 0 END, "status" = 1, "claimed_at" = strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now') WHERE o."id" IN (SELECT r."id" FROM (SELECT c."id", ROW_NUMBER() OVER (PARTITION BY c."aggregate_id" ORDER BY c."id") AS position, MIN(CASE WHEN ((c."status" = 0 AND c."next_retry_at" IS NULL) OR ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'))) OR (c."status" = 0 AND c."next_retry_at" <= strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')) OR (c."status" = 1 AND c."claimed_at" < strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', %s) AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'))))) THEN 1 ELSE 0 END) OVER (PARTITION BY c."aggregate_id" ORDER BY c."id") AS unbroken FROM "outbox" AS c WHERE c."status" IN (0, 1, 3)) AS r WHERE r.position <= %s AND r.unbroken = 1 ORDER BY r."id" LIMIT %s) RETURNING "id", "message_id", "topic", "aggregate_type", "aggregate_id", "partition_key", "payload", "headers", "trace_id", "attempts", CAST("claimed_at" AS TEXT), "created_at", "schema_version";

-- ack [1, 2, 3, '2026-11-21 12:00:00.123']
UPDATE "outbox" SET "status" = 2, "processed_at" = strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now') WHERE "id" IN (%s, %s, %s) AND "status" = 1 AND "claimed_at" = %s;

-- fail ['+1.500 seconds', 'nack', 4, '2026-11-21 12:00:00.123']
UPDATE "outbox" SET "attempts" = "attempts" + 1, "status" = 3, "next_retry_at" = strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', %s), "last_error" = %s WHERE "id" IN (%s) AND "status" = 1 AND "claimed_at" = %s;

-- bury [1, 'poison', 5, '2026-11-21 12:00:00.123']
UPDATE "outbox" SET "attempts" = "attempts" + %s, "status" = 4, "processed_at" = strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now'), "next_retry_at" = NULL, "last_error" = %s WHERE "id" IN (%s) AND "status" = 1 AND "claimed_at" = %s;

-- release [6, 7, '2026-11-21 12:00:00.123']
UPDATE "outbox" SET "status" = 0, "claimed_at" = NULL, "next_retry_at" = NULL WHERE "id" IN (%s, %s) AND "status" = 1 AND "claimed_at" = %s;

-- renew ['+60.000 seconds', 8, 9, '2026-11-21 12:00:00.123']
UPDATE "outbox" SET "next_retry_at" = strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', %s) WHERE "id" IN (%s, %s) AND "status" = 1 AND "claimed_at" = %s;

-- purge ['2026-11-14 00:00:00', 1000]
DELETE FROM "outbox" WHERE "id" IN (SELECT "id" FROM "outbox" WHERE "status" IN (2, 4) AND "processed_at" < %s ORDER BY "id" LIMIT %s);

-- insert []
INSERT INTO "outbox" ("message_id", "topic", "aggregate_type", "aggregate_id", "partition_key", "payload", "headers", "trace_id") VALUES (%s, %s, %s, %s, %s, %s, %s, %s), (%s, %s, %s, %s, %s, %s, %s, %s);

