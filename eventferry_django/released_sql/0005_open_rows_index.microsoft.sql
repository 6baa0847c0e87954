-- Migration 0005_open_rows_index on microsoft: the open-rows index in place of the first release's head-of-aggregate index.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_agg_open' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_{{table}}_agg_open] ON {{schema_prefix}}[{{table}}] ([aggregate_id], [id]) WHERE [status] IN (0, 1, 3);
END;
-- [statement]
IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_agg_id_id' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    DROP INDEX [IX_{{table}}_agg_id_id] ON {{schema_prefix}}[{{table}}];
END;
-- [backwards]
-- [statement]
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_agg_id_id' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_{{table}}_agg_id_id] ON {{schema_prefix}}[{{table}}] ([aggregate_id], [id]) INCLUDE ([status]);
END;
-- [statement]
IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_agg_open' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    DROP INDEX [IX_{{table}}_agg_open] ON {{schema_prefix}}[{{table}}];
END;
