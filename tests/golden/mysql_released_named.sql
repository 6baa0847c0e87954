-- 0.1.0 outbox forwards
CREATE TABLE IF NOT EXISTS `messaging`.`events` (
    `id` BIGINT NOT NULL AUTO_INCREMENT,
    `message_id` VARCHAR(64) NOT NULL,
    `topic` VARCHAR(255) NOT NULL,
    `aggregate_type` VARCHAR(255) NOT NULL,
    `aggregate_id` VARCHAR(255) NOT NULL,
    `partition_key` VARCHAR(255) NULL,
    `payload` JSON NOT NULL,
    `headers` JSON NOT NULL DEFAULT ('{}'),
    `trace_id` VARCHAR(255) NULL,
    `status` TINYINT UNSIGNED NOT NULL DEFAULT 0,
    `attempts` INT NOT NULL DEFAULT 0,
    `claimed_at` DATETIME(3) NULL,
    `next_retry_at` DATETIME(3) NULL,
    `created_at` DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
    `processed_at` DATETIME(3) NULL,
    `last_error` VARCHAR(4000) NULL,
    `schema_version` VARCHAR(255) NULL,
    `bucket` TINYINT UNSIGNED NULL,
    CONSTRAINT `PK_events` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_events_message_id` UNIQUE (`message_id`),
    CONSTRAINT `CK_events_payload_json` CHECK (JSON_VALID(`payload`)),
    CONSTRAINT `CK_events_headers_json` CHECK (JSON_VALID(`headers`)),
    CONSTRAINT `CK_events_status` CHECK (`status` IN (0, 1, 2, 3, 4)),
    CONSTRAINT `CK_events_claimed_at` CHECK (`status` <> 1 OR `claimed_at` IS NOT NULL)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_events_agg_open` ON `messaging`.`events` (`aggregate_id`, `status`, `id`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = 'messaging' AND table_name = 'events' AND index_name = 'IX_events_agg_open');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_events_claim_ready` ON `messaging`.`events` (`status`, `next_retry_at`, `id`, `aggregate_id`, `claimed_at`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = 'messaging' AND table_name = 'events' AND index_name = 'IX_events_claim_ready');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_events_done_processed_at` ON `messaging`.`events` (`status`, `processed_at`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = 'messaging' AND table_name = 'events' AND index_name = 'IX_events_done_processed_at');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_events_bucket_fresh` ON `messaging`.`events` (`bucket`, `status`, `id`, `next_retry_at`, `aggregate_id`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = 'messaging' AND table_name = 'events' AND index_name = 'IX_events_bucket_fresh');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;

-- 0.1.0 outbox backwards
DROP TABLE IF EXISTS `messaging`.`events`;

-- 0.1.0 inbox forwards
CREATE TABLE IF NOT EXISTS `messaging`.`handled` (
    `id` BIGINT NOT NULL AUTO_INCREMENT,
    `consumer` VARCHAR(255) NOT NULL,
    `message_id` VARCHAR(64) NOT NULL,
    `handled_at` DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
    CONSTRAINT `PK_handled` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_handled_consumer_message_id` UNIQUE (`consumer`, `message_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_handled_handled_at` ON `messaging`.`handled` (`handled_at`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = 'messaging' AND table_name = 'handled' AND index_name = 'IX_handled_handled_at');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;

-- 0.1.0 inbox backwards
DROP TABLE IF EXISTS `messaging`.`handled`;

-- 0.1.0 relays forwards
CREATE TABLE IF NOT EXISTS `messaging`.`events_relays` (
    `id` BIGINT NOT NULL AUTO_INCREMENT,
    `instance` VARCHAR(64) NOT NULL,
    `relay_id` VARCHAR(255) NOT NULL,
    `seen_at` DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
    CONSTRAINT `PK_events_relays` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_events_relays_instance` UNIQUE (`instance`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- 0.1.0 relays backwards
DROP TABLE IF EXISTS `messaging`.`events_relays`;

-- 0.1.0 task_results forwards
CREATE TABLE IF NOT EXISTS `messaging`.`events_task_results` (
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
    CONSTRAINT `PK_events_task_results` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_events_task_results_result_id` UNIQUE (`result_id`),
    CONSTRAINT `CK_events_task_results_arguments_json` CHECK (JSON_VALID(`arguments`)),
    CONSTRAINT `CK_events_task_results_worker_ids_json` CHECK (`worker_ids` IS NULL OR JSON_VALID(`worker_ids`)),
    CONSTRAINT `CK_events_task_results_return_value_json` CHECK (`return_value` IS NULL OR JSON_VALID(`return_value`)),
    CONSTRAINT `CK_events_task_results_errors_json` CHECK (`errors` IS NULL OR JSON_VALID(`errors`))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_events_task_results_status_finished_at` ON `messaging`.`events_task_results` (`status`, `finished_at`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = 'messaging' AND table_name = 'events_task_results' AND index_name = 'IX_events_task_results_status_finished_at');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;

-- 0.1.0 task_results backwards
DROP TABLE IF EXISTS `messaging`.`events_task_results`;

