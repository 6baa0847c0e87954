-- Migration 0008_schema_version on mysql: the outbox's nullable schema_version column (SQLite's unguarded: the migration reads the table's columns first).
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'ALTER TABLE {{schema_prefix}}`{{table}}` ADD COLUMN `schema_version` VARCHAR(255) NULL', 'DO 0') FROM information_schema.columns WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND column_name = 'schema_version')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [backwards]
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) > 0, 'ALTER TABLE {{schema_prefix}}`{{table}}` DROP COLUMN `schema_version`', 'DO 0') FROM information_schema.columns WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND column_name = 'schema_version')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
