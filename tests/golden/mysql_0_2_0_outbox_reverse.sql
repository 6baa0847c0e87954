SET @eventferry_ddl = (SELECT IF(COUNT(*) > 0, IF(VERSION() LIKE '%MariaDB%', 'ALTER TABLE `outbox` DROP CONSTRAINT `CK_outbox_claimed_needs_0_2`', 'ALTER TABLE `outbox` DROP CHECK `CK_outbox_claimed_needs_0_2`'), 'DO 0') FROM information_schema.table_constraints WHERE table_schema = DATABASE() AND table_name = 'outbox' AND constraint_name = 'CK_outbox_claimed_needs_0_2');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
