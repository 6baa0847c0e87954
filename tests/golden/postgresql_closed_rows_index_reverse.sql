CREATE INDEX IF NOT EXISTS "IX_outbox_done_processed_at" ON "outbox" ("status", "processed_at");
DROP INDEX IF EXISTS "IX_outbox_closed_rows";
