-- Release 0.1.0 on sqlite: the inbox table and its index.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE TABLE IF NOT EXISTS {{schema_prefix}}"{{table}}" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_{{table}}" PRIMARY KEY AUTOINCREMENT,
    "consumer" VARCHAR(255) NOT NULL,
    "message_id" VARCHAR(64) NOT NULL,
    "handled_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT "UQ_{{table}}_consumer_message_id" UNIQUE ("consumer", "message_id")
)
-- [statement]
CREATE INDEX IF NOT EXISTS "IX_{{table}}_handled_at" ON {{schema_prefix}}"{{table}}" ("handled_at")
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}"{{table}}"
