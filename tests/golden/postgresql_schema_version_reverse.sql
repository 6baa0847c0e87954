ALTER TABLE "outbox" DROP COLUMN IF EXISTS "schema_version";
