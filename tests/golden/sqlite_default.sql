CREATE TABLE IF NOT EXISTS "outbox" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_outbox" PRIMARY KEY AUTOINCREMENT,
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
    "schema_version" VARCHAR(255) NULL,
    "bucket" SMALLINT NULL,
    CONSTRAINT "UQ_outbox_message_id" UNIQUE ("message_id"),
    CONSTRAINT "CK_outbox_payload_json" CHECK (json_valid("payload")),
    CONSTRAINT "CK_outbox_headers_json" CHECK (json_valid("headers")),
    CONSTRAINT "CK_outbox_status" CHECK ("status" IN (0, 1, 2, 3, 4)),
    CONSTRAINT "CK_outbox_claimed_at" CHECK ("status" <> 1 OR "claimed_at" IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS "IX_outbox_agg_open" ON "outbox" ("aggregate_id", "id") WHERE "status" IN (0, 1, 3);
CREATE INDEX IF NOT EXISTS "IX_outbox_claim_ready" ON "outbox" ("status", "next_retry_at", "id", "aggregate_id", "claimed_at") WHERE "status" IN (0, 1, 3);
CREATE INDEX IF NOT EXISTS "IX_outbox_done_processed_at" ON "outbox" ("status", "processed_at");
