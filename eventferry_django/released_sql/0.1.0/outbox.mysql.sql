-- Release 0.1.0 on mysql: the outbox table and its indexes.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE TABLE IF NOT EXISTS {{schema_prefix}}`{{table}}` (
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
    CONSTRAINT `PK_{{table}}` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_{{table}}_message_id` UNIQUE (`message_id`),
    CONSTRAINT `CK_{{table}}_payload_json` CHECK (JSON_VALID(`payload`)),
    CONSTRAINT `CK_{{table}}_headers_json` CHECK (JSON_VALID(`headers`)),
    CONSTRAINT `CK_{{table}}_status` CHECK (`status` IN (0, 1, 2, 3, 4)),
    CONSTRAINT `CK_{{table}}_claimed_at` CHECK (`status` <> 1 OR `claimed_at` IS NOT NULL)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_{{table}}_agg_open` ON {{schema_prefix}}`{{table}}` (`aggregate_id`, `status`, `id`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND index_name = 'IX_{{table}}_agg_open')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_{{table}}_claim_ready` ON {{schema_prefix}}`{{table}}` (`status`, `next_retry_at`, `id`, `aggregate_id`, `claimed_at`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND index_name = 'IX_{{table}}_claim_ready')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_{{table}}_done_processed_at` ON {{schema_prefix}}`{{table}}` (`status`, `processed_at`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND index_name = 'IX_{{table}}_done_processed_at')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_{{table}}_bucket_fresh` ON {{schema_prefix}}`{{table}}` (`bucket`, `status`, `id`, `next_retry_at`, `aggregate_id`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND index_name = 'IX_{{table}}_bucket_fresh')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}`{{table}}`
