UPDATE `outbox` SET `status` = 0, `claimed_at` = NULL, `next_retry_at` = NULL WHERE `status` = 1;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'ALTER TABLE `outbox` ADD CONSTRAINT `CK_outbox_claimed_needs_0_2` CHECK (`status` <> 1)', 'DO 0') FROM information_schema.table_constraints WHERE table_schema = DATABASE() AND table_name = 'outbox' AND constraint_name = 'CK_outbox_claimed_needs_0_2');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
