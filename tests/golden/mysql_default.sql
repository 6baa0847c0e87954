CREATE TABLE IF NOT EXISTS `outbox` (
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
    CONSTRAINT `PK_outbox` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_outbox_message_id` UNIQUE (`message_id`),
    CONSTRAINT `CK_outbox_payload_json` CHECK (JSON_VALID(`payload`)),
    CONSTRAINT `CK_outbox_headers_json` CHECK (JSON_VALID(`headers`)),
    CONSTRAINT `CK_outbox_status` CHECK (`status` IN (0, 1, 2, 3, 4)),
    CONSTRAINT `CK_outbox_claimed_at` CHECK (`status` <> 1 OR `claimed_at` IS NOT NULL)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_outbox_agg_open` ON `outbox` (`aggregate_id`, `status`, `id`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'outbox' AND index_name = 'IX_outbox_agg_open');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_outbox_claim_ready` ON `outbox` (`status`, `next_retry_at`, `id`, `aggregate_id`, `claimed_at`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'outbox' AND index_name = 'IX_outbox_claim_ready');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_outbox_done_processed_at` ON `outbox` (`status`, `processed_at`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'outbox' AND index_name = 'IX_outbox_done_processed_at');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_outbox_bucket_fresh` ON `outbox` (`bucket`, `status`, `id`, `next_retry_at`, `aggregate_id`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'outbox' AND index_name = 'IX_outbox_bucket_fresh');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
