-- Release 0.2.0 on mysql: the batches in flight beside the outbox.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE TABLE IF NOT EXISTS {{schema_prefix}}`{{table}}_in_flight` (
    `id` BIGINT NOT NULL AUTO_INCREMENT,
    `relay` VARCHAR(64) NOT NULL,
    `batch` INT NOT NULL,
    `claimed_at` DATETIME(3) NOT NULL DEFAULT (UTC_TIMESTAMP(3)),
    `event_count` INT NOT NULL,
    `taken` INT NOT NULL DEFAULT 0,
    `events` MEDIUMTEXT NOT NULL,
    CONSTRAINT `PK_{{table}}_in_flight` PRIMARY KEY (`id`),
    CONSTRAINT `UQ_{{table}}_in_flight_batch` UNIQUE (`relay`, `batch`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}`{{table}}_in_flight`
