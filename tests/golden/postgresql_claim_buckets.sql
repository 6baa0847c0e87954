ALTER TABLE "outbox" ADD COLUMN IF NOT EXISTS "bucket" SMALLINT NULL;
CREATE INDEX IF NOT EXISTS "IX_outbox_bucket_fresh" ON "outbox" ("bucket", "id") INCLUDE ("aggregate_id") WHERE "status" = 0 AND "next_retry_at" IS NULL;
