DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'CK_outbox_claimed_needs_0_2'
                   AND conrelid = '"outbox"'::regclass) THEN
        ALTER TABLE "outbox" ADD CONSTRAINT "CK_outbox_claimed_needs_0_2" CHECK ("status" <> 1) NOT VALID;
    END IF;
END
$$;
UPDATE "outbox" SET "status" = 0, "claimed_at" = NULL, "next_retry_at" = NULL WHERE "status" = 1;
