DROP INDEX IF EXISTS "IX_outbox_bucket_fresh";
ALTER TABLE "outbox" DROP COLUMN IF EXISTS "bucket";
