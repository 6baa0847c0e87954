ALTER TABLE "outbox" ADD COLUMN "schema_version" VARCHAR(255) NULL;
