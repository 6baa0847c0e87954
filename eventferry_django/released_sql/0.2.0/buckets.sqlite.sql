-- Release 0.2.0 on sqlite: the bucket leases beside the outbox, one row per bucket.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE TABLE IF NOT EXISTS {{schema_prefix}}"{{table}}_buckets" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_{{table}}_buckets" PRIMARY KEY AUTOINCREMENT,
    "bucket" SMALLINT NOT NULL,
    "owner" VARCHAR(64) NULL,
    "epoch" INTEGER NOT NULL DEFAULT 0,
    "expires_at" DATETIME NULL,
    CONSTRAINT "UQ_{{table}}_buckets_bucket" UNIQUE ("bucket")
)
-- [statement]
INSERT INTO {{schema_prefix}}"{{table}}_buckets" ("bucket") SELECT h.d * 16 + l.d FROM (SELECT 0 AS d UNION ALL SELECT 1 AS d UNION ALL SELECT 2 AS d UNION ALL SELECT 3 AS d UNION ALL SELECT 4 AS d UNION ALL SELECT 5 AS d UNION ALL SELECT 6 AS d UNION ALL SELECT 7 AS d UNION ALL SELECT 8 AS d UNION ALL SELECT 9 AS d UNION ALL SELECT 10 AS d UNION ALL SELECT 11 AS d UNION ALL SELECT 12 AS d UNION ALL SELECT 13 AS d UNION ALL SELECT 14 AS d UNION ALL SELECT 15 AS d) h CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 AS d UNION ALL SELECT 2 AS d UNION ALL SELECT 3 AS d UNION ALL SELECT 4 AS d UNION ALL SELECT 5 AS d UNION ALL SELECT 6 AS d UNION ALL SELECT 7 AS d UNION ALL SELECT 8 AS d UNION ALL SELECT 9 AS d UNION ALL SELECT 10 AS d UNION ALL SELECT 11 AS d UNION ALL SELECT 12 AS d UNION ALL SELECT 13 AS d UNION ALL SELECT 14 AS d UNION ALL SELECT 15 AS d) l WHERE h.d * 16 + l.d < 256 AND NOT EXISTS (SELECT 1 FROM {{schema_prefix}}"{{table}}_buckets" e WHERE e."bucket" = h.d * 16 + l.d)
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}"{{table}}_buckets"
