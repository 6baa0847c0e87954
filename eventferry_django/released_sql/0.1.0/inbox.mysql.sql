-- Release 0.1.0 on mysql: the inbox table and its index.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE TABLE IF NOT EXISTS {{schema_prefix}}`{{table}}` (
    `id` BIGINT NOT NULL AUTO_INCREMENT,
    `consumer` VARCHAR(255) NOT NULL,
    `message_id` VARCHAR(64) NOT NULL,
    `handled_at` DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
    CONSTRAINT `PK_{{table}}` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_{{table}}_consumer_message_id` UNIQUE (`consumer`, `message_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_{{table}}_handled_at` ON {{schema_prefix}}`{{table}}` (`handled_at`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND index_name = 'IX_{{table}}_handled_at')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}`{{table}}`
