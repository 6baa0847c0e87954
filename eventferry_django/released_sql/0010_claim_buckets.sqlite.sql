-- Migration 0010_claim_buckets on sqlite: the outbox's nullable bucket column and the index of each bucket's fresh rows (SQLite: the column alone, unguarded: the migration reads the table's columns first).
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
ALTER TABLE {{schema_prefix}}"{{table}}" ADD COLUMN "bucket" SMALLINT NULL
-- [backwards]
-- [statement]
ALTER TABLE {{schema_prefix}}"{{table}}" DROP COLUMN "bucket"
