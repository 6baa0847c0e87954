CREATE TABLE IF NOT EXISTS "outbox_relays" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_outbox_relays" PRIMARY KEY AUTOINCREMENT,
    "instance" VARCHAR(64) NOT NULL,
    "relay_id" VARCHAR(255) NOT NULL,
    "seen_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT "UQ_outbox_relays_instance" UNIQUE ("instance")
);
