CREATE INDEX IF NOT EXISTS "IX_outbox_closed_rows" ON "outbox" ("status", "processed_at") WHERE "status" IN (2, 4);
DROP INDEX IF EXISTS "IX_outbox_done_processed_at";
