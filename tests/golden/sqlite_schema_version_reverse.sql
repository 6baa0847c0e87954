ALTER TABLE "outbox" DROP COLUMN "schema_version";
