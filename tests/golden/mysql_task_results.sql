CREATE TABLE IF NOT EXISTS `outbox_task_results` (
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
    CONSTRAINT `PK_outbox_task_results` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_outbox_task_results_result_id` UNIQUE (`result_id`),
    CONSTRAINT `CK_outbox_task_results_arguments_json` CHECK (JSON_VALID(`arguments`)),
    CONSTRAINT `CK_outbox_task_results_worker_ids_json` CHECK (`worker_ids` IS NULL OR JSON_VALID(`worker_ids`)),
    CONSTRAINT `CK_outbox_task_results_return_value_json` CHECK (`return_value` IS NULL OR JSON_VALID(`return_value`)),
    CONSTRAINT `CK_outbox_task_results_errors_json` CHECK (`errors` IS NULL OR JSON_VALID(`errors`))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_outbox_task_results_status_finished_at` ON `outbox_task_results` (`status`, `finished_at`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'outbox_task_results' AND index_name = 'IX_outbox_task_results_status_finished_at');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
