CREATE INDEX IF NOT EXISTS "IX_outbox_agg_open" ON "outbox" ("aggregate_id", "id") WHERE "status" IN (0, 1, 3);
DROP INDEX IF EXISTS "IX_outbox_agg_id_id";
