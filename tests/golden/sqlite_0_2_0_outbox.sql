CREATE TRIGGER IF NOT EXISTS "CK_outbox_claimed_needs_0_2_insert"
BEFORE INSERT ON "outbox" FOR EACH ROW WHEN NOT (NEW."status" <> 1)
BEGIN
    SELECT RAISE(ABORT, 'CK_outbox_claimed_needs_0_2: a relay of eventferry-django 0.1.0 is claiming rows (status 1), which 0.2.0 refuses: upgrade it to 0.2.0');
END;
CREATE TRIGGER IF NOT EXISTS "CK_outbox_claimed_needs_0_2_update"
BEFORE UPDATE OF "status" ON "outbox" FOR EACH ROW WHEN NOT (NEW."status" <> 1)
BEGIN
    SELECT RAISE(ABORT, 'CK_outbox_claimed_needs_0_2: a relay of eventferry-django 0.1.0 is claiming rows (status 1), which 0.2.0 refuses: upgrade it to 0.2.0');
END;
UPDATE "outbox" SET "status" = 0, "claimed_at" = NULL, "next_retry_at" = NULL WHERE "status" = 1;
