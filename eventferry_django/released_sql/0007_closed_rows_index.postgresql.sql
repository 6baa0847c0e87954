-- Migration 0007_closed_rows_index on postgresql: the retention index over closed rows only, where the vendor filters indexes.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE INDEX IF NOT EXISTS "IX_{{table}}_closed_rows" ON {{schema_prefix}}"{{table}}" ("status", "processed_at") WHERE "status" IN (2, 4)
-- [statement]
DROP INDEX IF EXISTS {{schema_prefix}}"IX_{{table}}_done_processed_at"
-- [backwards]
-- [statement]
CREATE INDEX IF NOT EXISTS "IX_{{table}}_done_processed_at" ON {{schema_prefix}}"{{table}}" ("status", "processed_at")
-- [statement]
DROP INDEX IF EXISTS {{schema_prefix}}"IX_{{table}}_closed_rows"
