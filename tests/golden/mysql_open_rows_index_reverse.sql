SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'CREATE INDEX `IX_outbox_agg_id_id` ON `outbox` (`aggregate_id`, `status`, `id`)', 'DO 0') FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'outbox' AND index_name = 'IX_outbox_agg_id_id');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
SET @eventferry_ddl = (SELECT IF(COUNT(*) > 0, 'DROP INDEX `IX_outbox_agg_open` ON `outbox`', 'DO 0') FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'outbox' AND index_name = 'IX_outbox_agg_open');
PREPARE eventferry_ddl FROM @eventferry_ddl;
EXECUTE eventferry_ddl;
DEALLOCATE PREPARE eventferry_ddl;
