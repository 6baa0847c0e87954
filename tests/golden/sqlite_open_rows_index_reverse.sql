CREATE INDEX IF NOT EXISTS "IX_outbox_agg_id_id" ON "outbox" ("aggregate_id", "status", "id");
DROP INDEX IF EXISTS "IX_outbox_agg_open";
