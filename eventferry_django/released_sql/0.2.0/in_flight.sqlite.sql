-- Release 0.2.0 on sqlite: the batches in flight beside the outbox.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE TABLE IF NOT EXISTS {{schema_prefix}}"{{table}}_in_flight" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_{{table}}_in_flight" PRIMARY KEY AUTOINCREMENT,
    "relay" VARCHAR(64) NOT NULL,
    "batch" INTEGER NOT NULL,
    "claimed_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    "event_count" INTEGER NOT NULL,
    "taken" INTEGER NOT NULL DEFAULT 0,
    "events" TEXT NOT NULL,
    CONSTRAINT "UQ_{{table}}_in_flight_batch" UNIQUE ("relay", "batch")
)
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}"{{table}}_in_flight"
