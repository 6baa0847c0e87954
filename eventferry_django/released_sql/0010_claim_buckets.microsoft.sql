-- Migration 0010_claim_buckets on microsoft: the outbox's nullable bucket column and the index of each bucket's fresh rows (SQLite: the column alone, unguarded: the migration reads the table's columns first).
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
IF NOT EXISTS (SELECT 1 FROM sys.columns WHERE name = N'bucket' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    ALTER TABLE {{schema_prefix}}[{{table}}] ADD [bucket] TINYINT NULL;
END;
-- [statement]
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_bucket_fresh' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_{{table}}_bucket_fresh] ON {{schema_prefix}}[{{table}}] ([bucket], [id]) INCLUDE ([aggregate_id]) WHERE [status] = 0 AND [next_retry_at] IS NULL;
END;
-- [backwards]
-- [statement]
IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_bucket_fresh' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    DROP INDEX [IX_{{table}}_bucket_fresh] ON {{schema_prefix}}[{{table}}];
END;
-- [statement]
IF EXISTS (SELECT 1 FROM sys.columns WHERE name = N'bucket' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    ALTER TABLE {{schema_prefix}}[{{table}}] DROP COLUMN [bucket];
END;
