DROP TRIGGER IF EXISTS "CK_outbox_claimed_needs_0_2_insert";
DROP TRIGGER IF EXISTS "CK_outbox_claimed_needs_0_2_update";
