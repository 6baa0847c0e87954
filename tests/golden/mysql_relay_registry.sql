CREATE TABLE IF NOT EXISTS `outbox_relays` (
    `id` BIGINT NOT NULL AUTO_INCREMENT,
    `instance` VARCHAR(64) NOT NULL,
    `relay_id` VARCHAR(255) NOT NULL,
    `seen_at` DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
    CONSTRAINT `PK_outbox_relays` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_outbox_relays_instance` UNIQUE (`instance`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
