ALTER TABLE "outbox" DROP COLUMN "bucket";
