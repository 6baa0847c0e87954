-- Release 0.1.0 on mysql: the Django tasks' results table beside the outbox.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE TABLE IF NOT EXISTS {{schema_prefix}}`{{table}}_task_results` (
    `id` BIGINT NOT NULL AUTO_INCREMENT,
    `result_id` VARCHAR(64) NOT NULL,
    `task_path` VARCHAR(255) NOT NULL,
    `backend` VARCHAR(255) NOT NULL,
    `queue_name` VARCHAR(255) NOT NULL,
    `priority` INT NOT NULL DEFAULT 0,
    `status` VARCHAR(64) NOT NULL,
    `arguments` JSON NOT NULL,
    `run_after` DATETIME(3) NULL,
    `enqueued_at` DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
    `started_at` DATETIME(3) NULL,
    `last_attempted_at` DATETIME(3) NULL,
    `finished_at` DATETIME(3) NULL,
    `attempts` INT NOT NULL DEFAULT 0,
    `worker_ids` JSON NULL,
    `return_value` JSON NULL,
    `errors` JSON NULL,
    CONSTRAINT `PK_{{table}}_task_results` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_{{table}}_task_results_result_id` UNIQUE (`result_id`),
    CONSTRAINT `CK_{{table}}_task_results_arguments_json` CHECK (JSON_VALID(`arguments`)),
    CONSTRAINT `CK_{{table}}_task_results_worker_ids_json` CHECK (`worker_ids` IS NULL OR JSON_VALID(`worker_ids`)),
    CONSTRAINT `CK_{{table}}_task_results_return_value_json` CHECK (`return_value` IS NULL OR JSON_VALID(`return_value`)),
    CONSTRAINT `CK_{{table}}_task_results_errors_json` CHECK (`errors` IS NULL OR JSON_VALID(`errors`))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_{{table}}_task_results_status_finished_at` ON {{schema_prefix}}`{{table}}_task_results` (`status`, `finished_at`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}_task_results' AND index_name = 'IX_{{table}}_task_results_status_finished_at')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}`{{table}}_task_results`
