-- Release 0.1.0 on sqlite: the outbox table and its indexes.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE TABLE IF NOT EXISTS {{schema_prefix}}"{{table}}" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_{{table}}" PRIMARY KEY AUTOINCREMENT,
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
    CONSTRAINT "UQ_{{table}}_message_id" UNIQUE ("message_id"),
    CONSTRAINT "CK_{{table}}_payload_json" CHECK (json_valid("payload")),
    CONSTRAINT "CK_{{table}}_headers_json" CHECK (json_valid("headers")),
    CONSTRAINT "CK_{{table}}_status" CHECK ("status" IN (0, 1, 2, 3, 4)),
    CONSTRAINT "CK_{{table}}_claimed_at" CHECK ("status" <> 1 OR "claimed_at" IS NOT NULL)
)
-- [statement]
CREATE INDEX IF NOT EXISTS "IX_{{table}}_agg_open" ON {{schema_prefix}}"{{table}}" ("aggregate_id", "id") WHERE "status" IN (0, 1, 3)
-- [statement]
CREATE INDEX IF NOT EXISTS "IX_{{table}}_claim_ready" ON {{schema_prefix}}"{{table}}" ("status", "next_retry_at", "id", "aggregate_id", "claimed_at") WHERE "status" IN (0, 1, 3)
-- [statement]
CREATE INDEX IF NOT EXISTS "IX_{{table}}_done_processed_at" ON {{schema_prefix}}"{{table}}" ("status", "processed_at")
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}"{{table}}"
