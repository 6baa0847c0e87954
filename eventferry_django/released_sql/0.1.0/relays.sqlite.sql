-- Release 0.1.0 on sqlite: the relay registry beside the outbox.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE TABLE IF NOT EXISTS {{schema_prefix}}"{{table}}_relays" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_{{table}}_relays" PRIMARY KEY AUTOINCREMENT,
    "instance" VARCHAR(64) NOT NULL,
    "relay_id" VARCHAR(255) NOT NULL,
    "seen_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT "UQ_{{table}}_relays_instance" UNIQUE ("instance")
)
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}"{{table}}_relays"
