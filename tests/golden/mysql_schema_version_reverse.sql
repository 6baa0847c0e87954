SET @eventferry_ddl = (SELECT IF(COUNT(*) > 0, 'ALTER TABLE `outbox` DROP COLUMN `schema_version`', 'DO 0') FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'outbox' AND column_name = 'schema_version');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
