-- Migration 0008_schema_version on postgresql: the outbox's nullable schema_version column (SQLite's unguarded: the migration reads the table's columns first).
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
ALTER TABLE {{schema_prefix}}"{{table}}" ADD COLUMN IF NOT EXISTS "schema_version" VARCHAR(255) NULL
-- [backwards]
-- [statement]
ALTER TABLE {{schema_prefix}}"{{table}}" DROP COLUMN IF EXISTS "schema_version"
