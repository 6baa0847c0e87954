-- The claim on postgresql, statement by statement, for the outbox named "outbox":
-- what eventferry_django/store/postgresql.py (PostgresqlClaim) sends. Each
-- %(name)s is a value bound by name (see eventferry_django/store/claim.py).
-- Written by the code and kept equal to it by tests/test_claim_sql.py: never
-- edit it; after a change to the claim run
-- EVENTFERRY_UPDATE_GOLDEN=1 pytest tests/test_claim_sql.py, and review the diff.

-- name: claim
WITH fresh AS (
    SELECT c."id", c."aggregate_id"
    FROM "outbox" AS c
    WHERE c."status" = 0 AND c."next_retry_at" IS NULL
      AND c."id" <= (SELECT MAX(w."id") FROM (SELECT f."id", f."aggregate_id" FROM "outbox" AS f WHERE f."status" = 0 AND f."next_retry_at" IS NULL ORDER BY f."status", f."next_retry_at", f."id" LIMIT %(window)s) AS w)
      AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL
    ORDER BY c."status", c."next_retry_at", c."id" LIMIT %(heads)s FOR UPDATE OF c SKIP LOCKED
), overdue AS (
    SELECT c."id", c."aggregate_id" FROM "outbox" AS c
    WHERE ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp()) OR (c."status" = 1 AND c."claimed_at" < (statement_timestamp() + %(lease_offset)s * INTERVAL '1 millisecond') AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp()))) AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL
    ORDER BY c."id" LIMIT %(heads)s FOR UPDATE OF c SKIP LOCKED
), heads AS (
    SELECT "id", "aggregate_id", ROW_NUMBER() OVER (ORDER BY "id") AS rank FROM (
        SELECT "id", "aggregate_id" FROM fresh
        UNION ALL
        SELECT "id", "aggregate_id" FROM overdue
        ORDER BY 1 LIMIT %(heads)s
    ) AS h
), picked AS (
    SELECT "id" FROM heads
    UNION ALL
    SELECT chain."id" FROM heads AS h CROSS JOIN LATERAL (
        SELECT r."id" FROM (
            SELECT c."id", MIN(CASE WHEN ((c."status" = 0 AND c."next_retry_at" IS NULL) OR ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp()) OR (c."status" = 1 AND c."claimed_at" < (statement_timestamp() + %(lease_offset)s * INTERVAL '1 millisecond') AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())))) THEN 1 ELSE 0 END) OVER (ORDER BY c."id") AS unbroken
            FROM "outbox" AS c
            WHERE c."aggregate_id" = h."aggregate_id" AND c."status" IN (0, 1, 3) AND c."id" > h."id"
            ORDER BY c."id" LIMIT LEAST(%(max_chain)s - 1, (%(limit)s - h.rank) / (SELECT COUNT(*) FROM heads))
        ) AS r WHERE r.unbroken = 1
    ) AS chain
    ORDER BY 1 LIMIT %(limit)s
)
UPDATE "outbox" AS o SET "attempts" = o."attempts" + CASE WHEN o."status" = 1 THEN 1 ELSE 0 END, "status" = 1, "claimed_at" = statement_timestamp()
WHERE o."id" = ANY(ARRAY(SELECT "id" FROM picked))
RETURNING o."id", o."message_id", o."topic", o."aggregate_type", o."aggregate_id", o."partition_key", o."payload"::text, o."headers"::text, o."trace_id", o."attempts", o."claimed_at"::text, o."created_at", o."schema_version";

-- name: claim_without_leases
WITH fresh AS (
    SELECT c."id", c."aggregate_id"
    FROM "outbox" AS c
    WHERE c."status" = 0 AND c."next_retry_at" IS NULL
      AND c."id" <= (SELECT MAX(w."id") FROM (SELECT f."id", f."aggregate_id" FROM "outbox" AS f WHERE f."status" = 0 AND f."next_retry_at" IS NULL ORDER BY f."status", f."next_retry_at", f."id" LIMIT %(window)s) AS w)
      AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL
    ORDER BY c."status", c."next_retry_at", c."id" LIMIT %(heads)s FOR UPDATE OF c SKIP LOCKED
), overdue AS (
    SELECT c."id", c."aggregate_id" FROM "outbox" AS c
    WHERE ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp())) AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL
    ORDER BY c."id" LIMIT %(heads)s FOR UPDATE OF c SKIP LOCKED
), heads AS (
    SELECT "id", "aggregate_id", ROW_NUMBER() OVER (ORDER BY "id") AS rank FROM (
        SELECT "id", "aggregate_id" FROM fresh
        UNION ALL
        SELECT "id", "aggregate_id" FROM overdue
        ORDER BY 1 LIMIT %(heads)s
    ) AS h
), picked AS (
    SELECT "id" FROM heads
    UNION ALL
    SELECT chain."id" FROM heads AS h CROSS JOIN LATERAL (
        SELECT r."id" FROM (
            SELECT c."id", MIN(CASE WHEN ((c."status" = 0 AND c."next_retry_at" IS NULL) OR ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp()) OR (c."status" = 1 AND c."claimed_at" < (statement_timestamp() + %(lease_offset)s * INTERVAL '1 millisecond') AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())))) THEN 1 ELSE 0 END) OVER (ORDER BY c."id") AS unbroken
            FROM "outbox" AS c
            WHERE c."aggregate_id" = h."aggregate_id" AND c."status" IN (0, 1, 3) AND c."id" > h."id"
            ORDER BY c."id" LIMIT LEAST(%(max_chain)s - 1, (%(limit)s - h.rank) / (SELECT COUNT(*) FROM heads))
        ) AS r WHERE r.unbroken = 1
    ) AS chain
    ORDER BY 1 LIMIT %(limit)s
)
UPDATE "outbox" AS o SET "attempts" = o."attempts" + CASE WHEN o."status" = 1 THEN 1 ELSE 0 END, "status" = 1, "claimed_at" = statement_timestamp()
WHERE o."id" = ANY(ARRAY(SELECT "id" FROM picked))
RETURNING o."id", o."message_id", o."topic", o."aggregate_type", o."aggregate_id", o."partition_key", o."payload"::text, o."headers"::text, o."trace_id", o."attempts", o."claimed_at"::text, o."created_at", o."schema_version";

-- name: claim_by_bucket
WITH fresh AS (
    SELECT c."id", c."aggregate_id"
    FROM "outbox" AS c
    WHERE c."id" = ANY(ARRAY(
        SELECT w."id" FROM (
            SELECT DISTINCT ON (w."aggregate_id") w.* FROM (
                SELECT f.* FROM unnest(%(buckets)s::smallint[]) AS b(bucket)
                CROSS JOIN LATERAL (SELECT f."id", f."aggregate_id" FROM "outbox" AS f WHERE f."bucket" = b.bucket AND f."status" = 0 AND f."next_retry_at" IS NULL ORDER BY f."bucket", f."id" LIMIT %(window)s) AS f
                UNION ALL
                (SELECT f."id", f."aggregate_id" FROM "outbox" AS f WHERE f."bucket" IS NULL AND f."status" = 0 AND f."next_retry_at" IS NULL ORDER BY f."bucket", f."id" LIMIT %(heads)s)
            ) AS w ORDER BY w."aggregate_id", w."id"
        ) AS w WHERE (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = w."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < w."id") IS NULL))
      AND c."status" = 0 AND c."next_retry_at" IS NULL
    ORDER BY c."id" LIMIT %(heads)s FOR UPDATE OF c SKIP LOCKED
), overdue AS (
    SELECT c."id", c."aggregate_id" FROM "outbox" AS c
    WHERE ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp()) OR (c."status" = 1 AND c."claimed_at" < (statement_timestamp() + %(lease_offset)s * INTERVAL '1 millisecond') AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp()))) AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL
    ORDER BY c."id" LIMIT %(heads)s FOR UPDATE OF c SKIP LOCKED
), heads AS (
    SELECT "id", "aggregate_id", ROW_NUMBER() OVER (ORDER BY "id") AS rank FROM (
        SELECT "id", "aggregate_id" FROM fresh
        UNION ALL
        SELECT "id", "aggregate_id" FROM overdue
        ORDER BY 1 LIMIT %(heads)s
    ) AS h
), picked AS (
    SELECT "id" FROM heads
    UNION ALL
    SELECT chain."id" FROM heads AS h CROSS JOIN LATERAL (
        SELECT r."id" FROM (
            SELECT c."id", MIN(CASE WHEN ((c."status" = 0 AND c."next_retry_at" IS NULL) OR ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp()) OR (c."status" = 1 AND c."claimed_at" < (statement_timestamp() + %(lease_offset)s * INTERVAL '1 millisecond') AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())))) THEN 1 ELSE 0 END) OVER (ORDER BY c."id") AS unbroken
            FROM "outbox" AS c
            WHERE c."aggregate_id" = h."aggregate_id" AND c."status" IN (0, 1, 3) AND c."id" > h."id"
            ORDER BY c."id" LIMIT LEAST(%(max_chain)s - 1, (%(limit)s - h.rank) / (SELECT COUNT(*) FROM heads))
        ) AS r WHERE r.unbroken = 1
    ) AS chain
    ORDER BY 1 LIMIT %(limit)s
)
UPDATE "outbox" AS o SET "attempts" = o."attempts" + CASE WHEN o."status" = 1 THEN 1 ELSE 0 END, "status" = 1, "claimed_at" = statement_timestamp()
WHERE o."id" = ANY(ARRAY(SELECT "id" FROM picked))
RETURNING o."id", o."message_id", o."topic", o."aggregate_type", o."aggregate_id", o."partition_key", o."payload"::text, o."headers"::text, o."trace_id", o."attempts", o."claimed_at"::text, o."created_at", o."schema_version";

-- name: claim_by_bucket_without_leases
WITH fresh AS (
    SELECT c."id", c."aggregate_id"
    FROM "outbox" AS c
    WHERE c."id" = ANY(ARRAY(
        SELECT w."id" FROM (
            SELECT DISTINCT ON (w."aggregate_id") w.* FROM (
                SELECT f.* FROM unnest(%(buckets)s::smallint[]) AS b(bucket)
                CROSS JOIN LATERAL (SELECT f."id", f."aggregate_id" FROM "outbox" AS f WHERE f."bucket" = b.bucket AND f."status" = 0 AND f."next_retry_at" IS NULL ORDER BY f."bucket", f."id" LIMIT %(window)s) AS f
                UNION ALL
                (SELECT f."id", f."aggregate_id" FROM "outbox" AS f WHERE f."bucket" IS NULL AND f."status" = 0 AND f."next_retry_at" IS NULL ORDER BY f."bucket", f."id" LIMIT %(heads)s)
            ) AS w ORDER BY w."aggregate_id", w."id"
        ) AS w WHERE (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = w."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < w."id") IS NULL))
      AND c."status" = 0 AND c."next_retry_at" IS NULL
    ORDER BY c."id" LIMIT %(heads)s FOR UPDATE OF c SKIP LOCKED
), overdue AS (
    SELECT c."id", c."aggregate_id" FROM "outbox" AS c
    WHERE ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp())) AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL
    ORDER BY c."id" LIMIT %(heads)s FOR UPDATE OF c SKIP LOCKED
), heads AS (
    SELECT "id", "aggregate_id", ROW_NUMBER() OVER (ORDER BY "id") AS rank FROM (
        SELECT "id", "aggregate_id" FROM fresh
        UNION ALL
        SELECT "id", "aggregate_id" FROM overdue
        ORDER BY 1 LIMIT %(heads)s
    ) AS h
), picked AS (
    SELECT "id" FROM heads
    UNION ALL
    SELECT chain."id" FROM heads AS h CROSS JOIN LATERAL (
        SELECT r."id" FROM (
            SELECT c."id", MIN(CASE WHEN ((c."status" = 0 AND c."next_retry_at" IS NULL) OR ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp()) OR (c."status" = 1 AND c."claimed_at" < (statement_timestamp() + %(lease_offset)s * INTERVAL '1 millisecond') AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())))) THEN 1 ELSE 0 END) OVER (ORDER BY c."id") AS unbroken
            FROM "outbox" AS c
            WHERE c."aggregate_id" = h."aggregate_id" AND c."status" IN (0, 1, 3) AND c."id" > h."id"
            ORDER BY c."id" LIMIT LEAST(%(max_chain)s - 1, (%(limit)s - h.rank) / (SELECT COUNT(*) FROM heads))
        ) AS r WHERE r.unbroken = 1
    ) AS chain
    ORDER BY 1 LIMIT %(limit)s
)
UPDATE "outbox" AS o SET "attempts" = o."attempts" + CASE WHEN o."status" = 1 THEN 1 ELSE 0 END, "status" = 1, "claimed_at" = statement_timestamp()
WHERE o."id" = ANY(ARRAY(SELECT "id" FROM picked))
RETURNING o."id", o."message_id", o."topic", o."aggregate_type", o."aggregate_id", o."partition_key", o."payload"::text, o."headers"::text, o."trace_id", o."attempts", o."claimed_at"::text, o."created_at", o."schema_version";
