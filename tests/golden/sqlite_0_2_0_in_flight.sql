CREATE TABLE IF NOT EXISTS "outbox_in_flight" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_outbox_in_flight" PRIMARY KEY AUTOINCREMENT,
    "relay" VARCHAR(64) NOT NULL,
    "batch" INTEGER NOT NULL,
    "claimed_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    "event_count" INTEGER NOT NULL,
    "taken" INTEGER NOT NULL DEFAULT 0,
    "events" TEXT NOT NULL,
    CONSTRAINT "UQ_outbox_in_flight_batch" UNIQUE ("relay", "batch")
);
