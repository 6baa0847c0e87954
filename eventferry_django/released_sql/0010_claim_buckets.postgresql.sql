-- Migration 0010_claim_buckets on postgresql: the outbox's nullable bucket column and the index of each bucket's fresh rows (SQLite: the column alone, unguarded: the migration reads the table's columns first).
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
ALTER TABLE {{schema_prefix}}"{{table}}" ADD COLUMN IF NOT EXISTS "bucket" SMALLINT NULL
-- [statement]
CREATE INDEX IF NOT EXISTS "IX_{{table}}_bucket_fresh" ON {{schema_prefix}}"{{table}}" ("bucket", "id") INCLUDE ("aggregate_id") WHERE "status" = 0 AND "next_retry_at" IS NULL
-- [backwards]
-- [statement]
DROP INDEX IF EXISTS {{schema_prefix}}"IX_{{table}}_bucket_fresh"
-- [statement]
ALTER TABLE {{schema_prefix}}"{{table}}" DROP COLUMN IF EXISTS "bucket"
