CREATE TABLE IF NOT EXISTS `inbox` (
    `id` BIGINT NOT NULL AUTO_INCREMENT,
    `consumer` VARCHAR(255) NOT NULL,
    `message_id` VARCHAR(64) NOT NULL,
    `handled_at` DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
    CONSTRAINT `PK_inbox` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_inbox_consumer_message_id` UNIQUE (`consumer`, `message_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_inbox_handled_at` ON `inbox` (`handled_at`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'inbox' AND index_name = 'IX_inbox_handled_at');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
