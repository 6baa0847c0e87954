-- fresh
SELECT c."id", c."created_at" FROM "outbox" AS c WHERE c."status" = 0 AND c."next_retry_at" IS NULL AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL ORDER BY c."status", c."next_retry_at", c."id" LIMIT 1;
-- scheduled
SELECT c."id", c."next_retry_at" FROM "outbox" AS c WHERE c."status" = 0 AND c."next_retry_at" <= statement_timestamp() AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL ORDER BY c."status", c."next_retry_at", c."id" LIMIT 1;
-- retry
SELECT c."id", c."next_retry_at" FROM "outbox" AS c WHERE c."status" = 3 AND c."next_retry_at" <= statement_timestamp() AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL ORDER BY c."status", c."next_retry_at", c."id" LIMIT 1;
