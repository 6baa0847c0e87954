-- 0.2.0 buckets forwards
CREATE TABLE IF NOT EXISTS `messaging`.`events_buckets` (
    `id` BIGINT NOT NULL AUTO_INCREMENT,
    `bucket` TINYINT UNSIGNED NOT NULL,
    `owner` VARCHAR(64) NULL,
    `epoch` INT NOT NULL DEFAULT 0,
    `expires_at` DATETIME(3) NULL,
    CONSTRAINT `PK_events_buckets` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_events_buckets_bucket` UNIQUE (`bucket`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO `messaging`.`events_buckets` (`bucket`) SELECT h.d * 16 + l.d FROM (SELECT 0 AS d UNION ALL SELECT 1 AS d UNION ALL SELECT 2 AS d UNION ALL SELECT 3 AS d UNION ALL SELECT 4 AS d UNION ALL SELECT 5 AS d UNION ALL SELECT 6 AS d UNION ALL SELECT 7 AS d UNION ALL SELECT 8 AS d UNION ALL SELECT 9 AS d UNION ALL SELECT 10 AS d UNION ALL SELECT 11 AS d UNION ALL SELECT 12 AS d UNION ALL SELECT 13 AS d UNION ALL SELECT 14 AS d UNION ALL SELECT 15 AS d) h CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 AS d UNION ALL SELECT 2 AS d UNION ALL SELECT 3 AS d UNION ALL SELECT 4 AS d UNION ALL SELECT 5 AS d UNION ALL SELECT 6 AS d UNION ALL SELECT 7 AS d UNION ALL SELECT 8 AS d UNION ALL SELECT 9 AS d UNION ALL SELECT 10 AS d UNION ALL SELECT 11 AS d UNION ALL SELECT 12 AS d UNION ALL SELECT 13 AS d UNION ALL SELECT 14 AS d UNION ALL SELECT 15 AS d) l WHERE h.d * 16 + l.d < 256 AND NOT EXISTS (SELECT 1 FROM `messaging`.`events_buckets` e WHERE e.`bucket` = h.d * 16 + l.d);

-- 0.2.0 buckets backwards
DROP TABLE IF EXISTS `messaging`.`events_buckets`;

-- 0.2.0 in_flight forwards
CREATE TABLE IF NOT EXISTS `messaging`.`events_in_flight` (
    `id` BIGINT NOT NULL AUTO_INCREMENT,
    `relay` VARCHAR(64) NOT NULL,
    `batch` INT NOT NULL,
    `claimed_at` DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
    `event_count` INT NOT NULL,
    `taken` INT NOT NULL DEFAULT 0,
    `events` MEDIUMTEXT NOT NULL,
    CONSTRAINT `PK_events_in_flight` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_events_in_flight_batch` UNIQUE (`relay`, `batch`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- 0.2.0 in_flight backwards
DROP TABLE IF EXISTS `messaging`.`events_in_flight`;

-- 0.2.0 outbox forwards
UPDATE `messaging`.`events` SET `status` = 0, `claimed_at` = NULL, `next_retry_at` = NULL WHERE `status` = 1;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'ALTER TABLE `messaging`.`events` ADD CONSTRAINT `CK_events_claimed_needs_0_2` CHECK (`status` <> 1)', 'DO 0') FROM information_schema.table_constraints WHERE table_schema = 'messaging' AND table_name = 'events' AND constraint_name = 'CK_events_claimed_needs_0_2');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;

-- 0.2.0 outbox backwards
SET @eventferry_ddl = (SELECT IF(COUNT(*) > 0, IF(VERSION() LIKE '%MariaDB%', 'ALTER TABLE `messaging`.`events` DROP CONSTRAINT `CK_events_claimed_needs_0_2`', 'ALTER TABLE `messaging`.`events` DROP CHECK `CK_events_claimed_needs_0_2`'), 'DO 0') FROM information_schema.table_constraints WHERE table_schema = 'messaging' AND table_name = 'events' AND constraint_name = 'CK_events_claimed_needs_0_2');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;

