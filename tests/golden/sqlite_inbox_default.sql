CREATE TABLE IF NOT EXISTS "inbox" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_inbox" PRIMARY KEY AUTOINCREMENT,
    "consumer" VARCHAR(255) NOT NULL,
    "message_id" VARCHAR(64) NOT NULL,
    "handled_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    CONSTRAINT "UQ_inbox_consumer_message_id" UNIQUE ("consumer", "message_id")
);
CREATE INDEX IF NOT EXISTS "IX_inbox_handled_at" ON "inbox" ("handled_at");
