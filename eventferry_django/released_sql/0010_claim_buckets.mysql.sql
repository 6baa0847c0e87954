-- Migration 0010_claim_buckets on mysql: the outbox's nullable bucket column and the index of each bucket's fresh rows (SQLite: the column alone, unguarded: the migration reads the table's columns first).
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'ALTER TABLE {{schema_prefix}}`{{table}}` ADD COLUMN `bucket` TINYINT UNSIGNED NULL', 'DO 0') FROM information_schema.columns WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND column_name = 'bucket')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_{{table}}_bucket_fresh` ON {{schema_prefix}}`{{table}}` (`bucket`, `status`, `id`, `next_retry_at`, `aggregate_id`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND index_name = 'IX_{{table}}_bucket_fresh')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [backwards]
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) > 0, 'DROP INDEX `IX_{{table}}_bucket_fresh` ON {{schema_prefix}}`{{table}}`', 'DO 0') FROM information_schema.statistics WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND index_name = 'IX_{{table}}_bucket_fresh')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) > 0, 'ALTER TABLE {{schema_prefix}}`{{table}}` DROP COLUMN `bucket`', 'DO 0') FROM information_schema.columns WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND column_name = 'bucket')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
