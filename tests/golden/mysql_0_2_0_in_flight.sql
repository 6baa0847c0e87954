CREATE TABLE IF NOT EXISTS `outbox_in_flight` (
    `id` BIGINT NOT NULL AUTO_INCREMENT,
    `relay` VARCHAR(64) NOT NULL,
    `batch` INT NOT NULL,
    `claimed_at` DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
    `event_count` INT NOT NULL,
    `taken` INT NOT NULL DEFAULT 0,
    `events` MEDIUMTEXT NOT NULL,
    CONSTRAINT `PK_outbox_in_flight` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_outbox_in_flight_batch` UNIQUE (`relay`, `batch`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
