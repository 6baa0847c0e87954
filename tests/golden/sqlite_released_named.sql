-- 0.1.0 outbox forwards
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
    "schema_version" VARCHAR(255) NULL,
    "bucket" SMALLINT NULL,
    CONSTRAINT "UQ_events_message_id" UNIQUE ("message_id"),
    CONSTRAINT "CK_events_payload_json" CHECK (json_valid("payload")),
    CONSTRAINT "CK_events_headers_json" CHECK (json_valid("headers")),
    CONSTRAINT "CK_events_status" CHECK ("status" IN (0, 1, 2, 3, 4)),
    CONSTRAINT "CK_events_claimed_at" CHECK ("status" <> 1 OR "claimed_at" IS NOT NULL)
);
CREATE INDEX IF NOT EXISTS "IX_events_agg_open" ON "events" ("aggregate_id", "id") WHERE "status" IN (0, 1, 3);
CREATE INDEX IF NOT EXISTS "IX_events_claim_ready" ON "events" ("status", "next_retry_at", "id", "aggregate_id", "claimed_at") WHERE "status" IN (0, 1, 3);
CREATE INDEX IF NOT EXISTS "IX_events_done_processed_at" ON "events" ("status", "processed_at");

-- 0.1.0 outbox backwards
DROP TABLE IF EXISTS "events";

-- 0.1.0 inbox forwards
CREATE TABLE IF NOT EXISTS "handled" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_handled" PRIMARY KEY AUTOINCREMENT,
    "consumer" VARCHAR(255) NOT NULL,
    "message_id" VARCHAR(64) NOT NULL,
    "handled_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT "UQ_handled_consumer_message_id" UNIQUE ("consumer", "message_id")
);
CREATE INDEX IF NOT EXISTS "IX_handled_handled_at" ON "handled" ("handled_at");

-- 0.1.0 inbox backwards
DROP TABLE IF EXISTS "handled";

-- 0.1.0 relays forwards
CREATE TABLE IF NOT EXISTS "events_relays" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_events_relays" PRIMARY KEY AUTOINCREMENT,
    "instance" VARCHAR(64) NOT NULL,
    "relay_id" VARCHAR(255) NOT NULL,
    "seen_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT "UQ_events_relays_instance" UNIQUE ("instance")
);

-- 0.1.0 relays backwards
DROP TABLE IF EXISTS "events_relays";

-- 0.1.0 task_results forwards
CREATE TABLE IF NOT EXISTS "events_task_results" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_events_task_results" PRIMARY KEY AUTOINCREMENT,
    "result_id" VARCHAR(64) NOT NULL,
    "task_path" VARCHAR(255) NOT NULL,
    "backend" VARCHAR(255) NOT NULL,
    "queue_name" VARCHAR(255) NOT NULL,
    "priority" INTEGER NOT NULL DEFAULT 0,
    "status" VARCHAR(64) NOT NULL,
    "arguments" TEXT NOT NULL,
    "run_after" DATETIME NULL,
    "enqueued_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    "started_at" DATETIME NULL,
    "last_attempted_at" DATETIME NULL,
    "finished_at" DATETIME NULL,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "worker_ids" TEXT NULL,
    "return_value" TEXT NULL,
    "errors" TEXT NULL,
    CONSTRAINT "UQ_events_task_results_result_id" UNIQUE ("result_id"),
    CONSTRAINT "CK_events_task_results_arguments_json" CHECK (json_valid("arguments")),
    CONSTRAINT "CK_events_task_results_worker_ids_json" CHECK ("worker_ids" IS NULL OR json_valid("worker_ids")),
    CONSTRAINT "CK_events_task_results_return_value_json" CHECK ("return_value" IS NULL OR json_valid("return_value")),
    CONSTRAINT "CK_events_task_results_errors_json" CHECK ("errors" IS NULL OR json_valid("errors"))
);
CREATE INDEX IF NOT EXISTS "IX_events_task_results_status_finished_at" ON "events_task_results" ("status", "finished_at");

-- 0.1.0 task_results backwards
DROP TABLE IF EXISTS "events_task_results";

