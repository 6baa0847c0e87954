-- Migration 0005_open_rows_index on mysql: the open-rows index in place of the first release's head-of-aggregate index.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_{{table}}_agg_open` ON {{schema_prefix}}`{{table}}` (`aggregate_id`, `status`, `id`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND index_name = 'IX_{{table}}_agg_open')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) > 0, 'DROP INDEX `IX_{{table}}_agg_id_id` ON {{schema_prefix}}`{{table}}`', 'DO 0') FROM information_schema.statistics WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND index_name = 'IX_{{table}}_agg_id_id')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [backwards]
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_{{table}}_agg_id_id` ON {{schema_prefix}}`{{table}}` (`aggregate_id`, `status`, `id`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND index_name = 'IX_{{table}}_agg_id_id')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) > 0, 'DROP INDEX `IX_{{table}}_agg_open` ON {{schema_prefix}}`{{table}}`', 'DO 0') FROM information_schema.statistics WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND index_name = 'IX_{{table}}_agg_open')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
