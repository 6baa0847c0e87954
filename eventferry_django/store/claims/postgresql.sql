-- The claim on postgresql, statement by statement, for the outbox named "outbox":
-- what eventferry_django/store/postgresql.py (PostgresqlClaim) sends. Each
-- %(name)s is a value bound by name (see eventferry_django/store/claim.py).
-- Written by the code and kept equal to it by tests/test_claim_sql.py: never
-- edit it; after a change to the claim run
-- EVENTFERRY_UPDATE_GOLDEN=1 pytest tests/test_claim_sql.py, and review the diff.

-- name: claim
WITH fresh AS (
    SELECT w."id", w."aggregate_id", w.ctid FROM (
        SELECT DISTINCT ON (f."aggregate_id") f.*
        FROM (SELECT f."id", f."aggregate_id", f."ctid" FROM "outbox" AS f WHERE f."status" = 0 AND f."next_retry_at" IS NULL ORDER BY f."status", f."next_retry_at", f."id" LIMIT %(window)s) AS f
        WHERE TRUE AND f."aggregate_id" NOT IN (SELECT json_array_elements_text(%(in_flight)s::json))
        ORDER BY f."aggregate_id", f."id"
    ) AS w WHERE (NOT EXISTS (SELECT 1 FROM "outbox" AS x WHERE x."status" IN (1, 3)) AND NOT EXISTS (SELECT 1 FROM "outbox" AS x WHERE x."status" = 0 AND x."next_retry_at" IS NOT NULL)) OR (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = w."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < w."id") IS NULL
    ORDER BY w."id" LIMIT %(heads)s
), overdue AS (
    SELECT c."id", c."aggregate_id", c.ctid FROM "outbox" AS c
    WHERE ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp())) AND c."aggregate_id" NOT IN (SELECT json_array_elements_text(%(in_flight)s::json)) AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL
    ORDER BY c."id" LIMIT %(heads)s
), heads AS (
    SELECT "id", "aggregate_id", ctid, ROW_NUMBER() OVER (ORDER BY "id") AS rank FROM (
        SELECT "id", "aggregate_id", ctid FROM fresh
        UNION ALL
        SELECT "id", "aggregate_id", ctid FROM overdue
        ORDER BY 1 LIMIT %(heads)s
    ) AS h
), picked AS (
    SELECT "id", ctid FROM heads
    UNION ALL
    SELECT chain."id", chain.ctid FROM heads AS h CROSS JOIN LATERAL (
        SELECT r."id", r.ctid FROM (
            SELECT c."id", c.ctid, MIN(CASE WHEN ((c."status" = 0 AND c."next_retry_at" IS NULL) OR ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp()))) THEN 1 ELSE 0 END) OVER (ORDER BY c."id") AS unbroken
            FROM "outbox" AS c
            WHERE c."aggregate_id" = h."aggregate_id" AND c."status" IN (0, 1, 3) AND c."id" > h."id"
            ORDER BY c."id" LIMIT LEAST(%(max_chain)s - 1, (%(limit)s - h.rank) / (SELECT COUNT(*) FROM heads))
        ) AS r WHERE r.unbroken = 1
    ) AS chain
    ORDER BY 1 LIMIT %(limit)s
)
SELECT o."id", o."message_id", o."topic", o."aggregate_type", o."aggregate_id", o."partition_key", o."payload"::text, o."headers"::text, o."trace_id", o."attempts", EXTRACT(EPOCH FROM o."created_at")::float8, o."schema_version" FROM picked AS p CROSS JOIN LATERAL (SELECT * FROM "outbox" AS r WHERE r.ctid = p.ctid LIMIT 1) AS o;

-- name: claim_by_bucket
WITH fresh AS (
    SELECT w."id", w."aggregate_id", w.ctid FROM (
        SELECT DISTINCT ON (f."aggregate_id") f.*
        FROM unnest(%(buckets)s::smallint[]) AS b(bucket)
        CROSS JOIN LATERAL (SELECT f."id", f."aggregate_id", f."ctid" FROM "outbox" AS f WHERE f."bucket" = b.bucket AND f."status" = 0 AND f."next_retry_at" IS NULL ORDER BY f."bucket", f."id" LIMIT %(window)s) AS f
        WHERE TRUE AND f."aggregate_id" NOT IN (SELECT json_array_elements_text(%(in_flight)s::json))
        ORDER BY f."aggregate_id", f."id"
    ) AS w WHERE (NOT EXISTS (SELECT 1 FROM "outbox" AS x WHERE x."status" IN (1, 3)) AND NOT EXISTS (SELECT 1 FROM "outbox" AS x WHERE x."status" = 0 AND x."next_retry_at" IS NOT NULL) AND NOT EXISTS (SELECT 1 FROM "outbox" AS x WHERE x."bucket" IS NULL AND x."status" = 0 AND x."next_retry_at" IS NULL)) OR (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = w."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < w."id") IS NULL
    ORDER BY w."id" LIMIT %(heads)s
), overdue AS (
    SELECT c."id", c."aggregate_id", c.ctid FROM "outbox" AS c
    WHERE ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp())) AND c."bucket" = ANY(%(buckets)s::smallint[]) AND c."aggregate_id" NOT IN (SELECT json_array_elements_text(%(in_flight)s::json)) AND (SELECT MAX(e."id") FROM "outbox" e WHERE e."aggregate_id" = c."aggregate_id" AND e."status" IN (0, 1, 3) AND e."id" < c."id") IS NULL
    ORDER BY c."id" LIMIT %(heads)s
), heads AS (
    SELECT "id", "aggregate_id", ctid, ROW_NUMBER() OVER (ORDER BY "id") AS rank FROM (
        SELECT "id", "aggregate_id", ctid FROM fresh
        UNION ALL
        SELECT "id", "aggregate_id", ctid FROM overdue
        ORDER BY 1 LIMIT %(heads)s
    ) AS h
), picked AS (
    SELECT "id", ctid FROM heads
    UNION ALL
    SELECT chain."id", chain.ctid FROM heads AS h CROSS JOIN LATERAL (
        SELECT r."id", r.ctid FROM (
            SELECT c."id", c.ctid, MIN(CASE WHEN ((c."status" = 0 AND c."next_retry_at" IS NULL) OR ((c."status" = 3 AND (c."next_retry_at" IS NULL OR c."next_retry_at" <= statement_timestamp())) OR (c."status" = 0 AND c."next_retry_at" <= statement_timestamp()))) THEN 1 ELSE 0 END) OVER (ORDER BY c."id") AS unbroken
            FROM "outbox" AS c
            WHERE c."aggregate_id" = h."aggregate_id" AND c."status" IN (0, 1, 3) AND c."id" > h."id"
            ORDER BY c."id" LIMIT LEAST(%(max_chain)s - 1, (%(limit)s - h.rank) / (SELECT COUNT(*) FROM heads))
        ) AS r WHERE r.unbroken = 1
    ) AS chain
    ORDER BY 1 LIMIT %(limit)s
)
SELECT o."id", o."message_id", o."topic", o."aggregate_type", o."aggregate_id", o."partition_key", o."payload"::text, o."headers"::text, o."trace_id", o."attempts", EXTRACT(EPOCH FROM o."created_at")::float8, o."schema_version" FROM picked AS p CROSS JOIN LATERAL (SELECT * FROM "outbox" AS r WHERE r.ctid = p.ctid LIMIT 1) AS o;
