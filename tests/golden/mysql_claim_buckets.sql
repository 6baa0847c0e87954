SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'ALTER TABLE `outbox` ADD COLUMN `bucket` TINYINT UNSIGNED NULL', 'DO 0') FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = 'outbox' AND column_name = 'bucket');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_outbox_bucket_fresh` ON `outbox` (`bucket`, `status`, `id`, `next_retry_at`, `aggregate_id`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'outbox' AND index_name = 'IX_outbox_bucket_fresh');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
