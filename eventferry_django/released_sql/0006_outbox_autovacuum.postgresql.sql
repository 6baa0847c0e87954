-- Migration 0006_outbox_autovacuum on postgresql: the outbox's autovacuum tuning (PostgreSQL only).
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
ALTER TABLE IF EXISTS {{schema_prefix}}"{{table}}" SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000, autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 10000, vacuum_index_cleanup = on)
-- [backwards]
-- [statement]
ALTER TABLE IF EXISTS {{schema_prefix}}"{{table}}" RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_analyze_scale_factor, autovacuum_analyze_threshold, vacuum_index_cleanup)
