ALTER TABLE "outbox" DROP CONSTRAINT IF EXISTS "CK_outbox_claimed_needs_0_2";
