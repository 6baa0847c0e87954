-- 0.2.0 buckets forwards
CREATE TABLE IF NOT EXISTS "events_buckets" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_events_buckets" PRIMARY KEY AUTOINCREMENT,
    "bucket" SMALLINT NOT NULL,
    "owner" VARCHAR(64) NULL,
    "epoch" INTEGER NOT NULL DEFAULT 0,
    "expires_at" DATETIME NULL,
    CONSTRAINT "UQ_events_buckets_bucket" UNIQUE ("bucket")
);
INSERT INTO "events_buckets" ("bucket") SELECT h.d * 16 + l.d FROM (SELECT 0 AS d UNION ALL SELECT 1 AS d UNION ALL SELECT 2 AS d UNION ALL SELECT 3 AS d UNION ALL SELECT 4 AS d UNION ALL SELECT 5 AS d UNION ALL SELECT 6 AS d UNION ALL SELECT 7 AS d UNION ALL SELECT 8 AS d UNION ALL SELECT 9 AS d UNION ALL SELECT 10 AS d UNION ALL SELECT 11 AS d UNION ALL SELECT 12 AS d UNION ALL SELECT 13 AS d UNION ALL SELECT 14 AS d UNION ALL SELECT 15 AS d) h CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 AS d UNION ALL SELECT 2 AS d UNION ALL SELECT 3 AS d UNION ALL SELECT 4 AS d UNION ALL SELECT 5 AS d UNION ALL SELECT 6 AS d UNION ALL SELECT 7 AS d UNION ALL SELECT 8 AS d UNION ALL SELECT 9 AS d UNION ALL SELECT 10 AS d UNION ALL SELECT 11 AS d UNION ALL SELECT 12 AS d UNION ALL SELECT 13 AS d UNION ALL SELECT 14 AS d UNION ALL SELECT 15 AS d) l WHERE h.d * 16 + l.d < 256 AND NOT EXISTS (SELECT 1 FROM "events_buckets" e WHERE e."bucket" = h.d * 16 + l.d);

-- 0.2.0 buckets backwards
DROP TABLE IF EXISTS "events_buckets";

-- 0.2.0 in_flight forwards
CREATE TABLE IF NOT EXISTS "events_in_flight" (
    "id" INTEGER NOT NULL CONSTRAINT "PK_events_in_flight" PRIMARY KEY AUTOINCREMENT,
    "relay" VARCHAR(64) NOT NULL,
    "batch" INTEGER NOT NULL,
    "claimed_at" DATETIME NOT NULL DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now')),
    "event_count" INTEGER NOT NULL,
    "taken" INTEGER NOT NULL DEFAULT 0,
    "events" TEXT NOT NULL,
    CONSTRAINT "UQ_events_in_flight_batch" UNIQUE ("relay", "batch")
);

-- 0.2.0 in_flight backwards
DROP TABLE IF EXISTS "events_in_flight";

-- 0.2.0 outbox forwards
CREATE TRIGGER IF NOT EXISTS "CK_events_claimed_needs_0_2_insert"
BEFORE INSERT ON "events" FOR EACH ROW WHEN NOT (NEW."status" <> 1)
BEGIN
    SELECT RAISE(ABORT, 'CK_events_claimed_needs_0_2: a relay of eventferry-django 0.1.0 is claiming rows (status 1), which 0.2.0 refuses: upgrade it to 0.2.0');
END;
CREATE TRIGGER IF NOT EXISTS "CK_events_claimed_needs_0_2_update"
BEFORE UPDATE OF "status" ON "events" FOR EACH ROW WHEN NOT (NEW."status" <> 1)
BEGIN
    SELECT RAISE(ABORT, 'CK_events_claimed_needs_0_2: a relay of eventferry-django 0.1.0 is claiming rows (status 1), which 0.2.0 refuses: upgrade it to 0.2.0');
END;
UPDATE "events" SET "status" = 0, "claimed_at" = NULL, "next_retry_at" = NULL WHERE "status" = 1;

-- 0.2.0 outbox backwards
DROP TRIGGER IF EXISTS "CK_events_claimed_needs_0_2_insert";
DROP TRIGGER IF EXISTS "CK_events_claimed_needs_0_2_update";

