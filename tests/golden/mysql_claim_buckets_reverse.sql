SET @eventferry_ddl = (SELECT IF(COUNT(*) > 0, 'DROP INDEX `IX_outbox_bucket_fresh` ON `outbox`', 'DO 0') FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'outbox' AND index_name = 'IX_outbox_bucket_fresh');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
SET @eventferry_ddl = (SELECT IF(COUNT(*) > 0, 'ALTER TABLE `outbox` DROP COLUMN `bucket`', 'DO 0') FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'outbox' AND column_name = 'bucket');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
