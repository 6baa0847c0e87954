-- Migration 0007_closed_rows_index on microsoft: the retention index over closed rows only, where the vendor filters indexes.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_closed_rows' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_{{table}}_closed_rows] ON {{schema_prefix}}[{{table}}] ([status], [processed_at]) WHERE [status] IN (2, 4);
END;
-- [statement]
IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_done_processed_at' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    DROP INDEX [IX_{{table}}_done_processed_at] ON {{schema_prefix}}[{{table}}];
END;
-- [backwards]
-- [statement]
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_done_processed_at' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_{{table}}_done_processed_at] ON {{schema_prefix}}[{{table}}] ([status], [processed_at]);
END;
-- [statement]
IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_closed_rows' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    DROP INDEX [IX_{{table}}_closed_rows] ON {{schema_prefix}}[{{table}}];
END;
