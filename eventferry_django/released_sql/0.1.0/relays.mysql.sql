-- Release 0.1.0 on mysql: the relay registry beside the outbox.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE TABLE IF NOT EXISTS {{schema_prefix}}`{{table}}_relays` (
    `id` BIGINT NOT NULL AUTO_INCREMENT,
    `instance` VARCHAR(64) NOT NULL,
    `relay_id` VARCHAR(255) NOT NULL,
    `seen_at` DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
    CONSTRAINT `PK_{{table}}_relays` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_{{table}}_relays_instance` UNIQUE (`instance`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}`{{table}}_relays`
