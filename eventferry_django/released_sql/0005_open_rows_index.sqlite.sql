-- Migration 0005_open_rows_index on sqlite: the open-rows index in place of the first release's head-of-aggregate index.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE INDEX IF NOT EXISTS "IX_{{table}}_agg_open" ON {{schema_prefix}}"{{table}}" ("aggregate_id", "id") WHERE "status" IN (0, 1, 3)
-- [statement]
DROP INDEX IF EXISTS {{schema_prefix}}"IX_{{table}}_agg_id_id"
-- [backwards]
-- [statement]
CREATE INDEX IF NOT EXISTS "IX_{{table}}_agg_id_id" ON {{schema_prefix}}"{{table}}" ("aggregate_id", "status", "id")
-- [statement]
DROP INDEX IF EXISTS {{schema_prefix}}"IX_{{table}}_agg_open"
