-- Release 0.2.0 on microsoft: the bucket leases beside the outbox, one row per bucket.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
IF OBJECT_ID(N'{{schema_prefix}}[{{table}}_buckets]', N'U') IS NULL
BEGIN
    CREATE TABLE {{schema_prefix}}[{{table}}_buckets] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [bucket] TINYINT NOT NULL,
        [owner] NVARCHAR(64) NULL,
        [epoch] INT NOT NULL CONSTRAINT [DF_{{table}}_buckets_epoch] DEFAULT (0),
        [expires_at] DATETIME2(3) NULL,
        CONSTRAINT [PK_{{table}}_buckets] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_{{table}}_buckets_bucket] UNIQUE ([bucket])
    );
END;
-- [statement]
INSERT INTO {{schema_prefix}}[{{table}}_buckets] ([bucket]) SELECT h.d * 16 + l.d FROM (SELECT 0 AS d UNION ALL SELECT 1 AS d UNION ALL SELECT 2 AS d UNION ALL SELECT 3 AS d UNION ALL SELECT 4 AS d UNION ALL SELECT 5 AS d UNION ALL SELECT 6 AS d UNION ALL SELECT 7 AS d UNION ALL SELECT 8 AS d UNION ALL SELECT 9 AS d UNION ALL SELECT 10 AS d UNION ALL SELECT 11 AS d UNION ALL SELECT 12 AS d UNION ALL SELECT 13 AS d UNION ALL SELECT 14 AS d UNION ALL SELECT 15 AS d) h CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 AS d UNION ALL SELECT 2 AS d UNION ALL SELECT 3 AS d UNION ALL SELECT 4 AS d UNION ALL SELECT 5 AS d UNION ALL SELECT 6 AS d UNION ALL SELECT 7 AS d UNION ALL SELECT 8 AS d UNION ALL SELECT 9 AS d UNION ALL SELECT 10 AS d UNION ALL SELECT 11 AS d UNION ALL SELECT 12 AS d UNION ALL SELECT 13 AS d UNION ALL SELECT 14 AS d UNION ALL SELECT 15 AS d) l WHERE h.d * 16 + l.d < 256 AND NOT EXISTS (SELECT 1 FROM {{schema_prefix}}[{{table}}_buckets] e WHERE e.[bucket] = h.d * 16 + l.d)
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}[{{table}}_buckets];
