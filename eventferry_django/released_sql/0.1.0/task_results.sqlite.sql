-- Release 0.1.0 on sqlite: the Django tasks' results table beside the outbox.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE TABLE IF NOT EXISTS {{schema_prefix}}"{{table}}_task_results" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_{{table}}_task_results" PRIMARY KEY AUTOINCREMENT,
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
    CONSTRAINT "UQ_{{table}}_task_results_result_id" UNIQUE ("result_id"),
    CONSTRAINT "CK_{{table}}_task_results_arguments_json" CHECK (json_valid("arguments")),
    CONSTRAINT "CK_{{table}}_task_results_worker_ids_json" CHECK ("worker_ids" IS NULL OR json_valid("worker_ids")),
    CONSTRAINT "CK_{{table}}_task_results_return_value_json" CHECK ("return_value" IS NULL OR json_valid("return_value")),
    CONSTRAINT "CK_{{table}}_task_results_errors_json" CHECK ("errors" IS NULL OR json_valid("errors"))
)
-- [statement]
CREATE INDEX IF NOT EXISTS "IX_{{table}}_task_results_status_finished_at" ON {{schema_prefix}}"{{table}}_task_results" ("status", "finished_at")
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}"{{table}}_task_results"
