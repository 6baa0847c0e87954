-- Migration 0008_schema_version on microsoft: the outbox's nullable schema_version column (SQLite's unguarded: the migration reads the table's columns first).
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
IF NOT EXISTS (SELECT 1 FROM sys.columns WHERE name = N'schema_version' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    ALTER TABLE {{schema_prefix}}[{{table}}] ADD [schema_version] NVARCHAR(255) NULL;
END;
-- [backwards]
-- [statement]
IF EXISTS (SELECT 1 FROM sys.columns WHERE name = N'schema_version' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    ALTER TABLE {{schema_prefix}}[{{table}}] DROP COLUMN [schema_version];
END;
