-- 0001_initial forwards
CREATE TABLE IF NOT EXISTS "events" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_events" PRIMARY KEY AUTOINCREMENT,
    "message_id" VARCHAR(64) NOT NULL,
    "topic" VARCHAR(255) NOT NULL,
    "aggregate_type" VARCHAR(255) NOT NULL,
    "aggregate_id" VARCHAR(255) NOT NULL,
    "partition_key" VARCHAR(255) NULL,
    "payload" TEXT NOT NULL,
    "headers" TEXT NOT NULL DEFAULT '{}',
    "trace_id" VARCHAR(255) NULL,
    "status" SMALLINT NOT NULL DEFAULT 0,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "claimed_at" DATETIME NULL,
    "next_retry_at" DATETIME NULL,
    "created_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    "processed_at" DATETIME NULL,
    "last_error" VARCHAR(4000) NULL,
    CONSTRAINT "UQ_events_message_id" UNIQUE ("message_id"),
    CONSTRAINT "CK_events_payload_json" CHECK (json_valid("payload")),
    CONSTRAINT "CK_events_headers_json" CHECK (json_valid("headers")),
    CONSTRAINT "CK_events_status" CHECK ("status" IN (0, 1, 2, 3, 4)),
    CONSTRAINT "CK_events_claimed_at" CHECK ("status" <> 1 OR "claimed_at" IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS "IX_events_agg_open" ON "events" ("aggregate_id", "id") WHERE "status" IN (0, 1, 3);
CREATE INDEX IF NOT EXISTS "IX_events_claim_ready" ON "events" ("status", "next_retry_at", "id", "aggregate_id", "claimed_at") WHERE "status" IN (0, 1, 3);
CREATE INDEX IF NOT EXISTS "IX_events_done_processed_at" ON "events" ("status", "processed_at");

-- 0001_initial backwards
DROP TABLE IF EXISTS "events";

-- 0004_inbox forwards
CREATE TABLE IF NOT EXISTS "handled" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_handled" PRIMARY KEY AUTOINCREMENT,
    "consumer" VARCHAR(255) NOT NULL,
    "message_id" VARCHAR(64) NOT NULL,
    "handled_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT "UQ_handled_consumer_message_id" UNIQUE ("consumer", "message_id")
);
CREATE INDEX IF NOT EXISTS "IX_handled_handled_at" ON "handled" ("handled_at");

-- 0004_inbox backwards
DROP TABLE IF EXISTS "handled";

-- 0005_open_rows_index forwards
CREATE INDEX IF NOT EXISTS "IX_events_agg_open" ON "events" ("aggregate_id", "id") WHERE "status" IN (0, 1, 3);
DROP INDEX IF EXISTS "IX_events_agg_id_id";

-- 0005_open_rows_index backwards
CREATE INDEX IF NOT EXISTS "IX_events_agg_id_id" ON "events" ("aggregate_id", "status", "id");
DROP INDEX IF EXISTS "IX_events_agg_open";

-- 0006_outbox_autovacuum forwards


-- 0006_outbox_autovacuum backwards


-- 0007_closed_rows_index forwards


-- 0007_closed_rows_index backwards


-- 0008_schema_version forwards
ALTER TABLE "events" ADD COLUMN "schema_version" VARCHAR(255) NULL;

-- 0008_schema_version backwards
ALTER TABLE "events" DROP COLUMN "schema_version";

-- 0009_relay_registry forwards
CREATE TABLE IF NOT EXISTS "events_relays" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_events_relays" PRIMARY KEY AUTOINCREMENT,
    "instance" VARCHAR(64) NOT NULL,
    "relay_id" VARCHAR(255) NOT NULL,
    "seen_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT "UQ_events_relays_instance" UNIQUE ("instance")
);

-- 0009_relay_registry backwards
DROP TABLE IF EXISTS "events_relays";

-- 0010_claim_buckets forwards
ALTER TABLE "events" ADD COLUMN "bucket" SMALLINT NULL;

-- 0010_claim_buckets backwards
ALTER TABLE "events" DROP COLUMN "bucket";

