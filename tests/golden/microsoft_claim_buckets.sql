IF NOT EXISTS (SELECT 1 FROM sys.columns WHERE name = N'bucket' AND object_id = OBJECT_ID(N'[dbo].[outbox]', N'U'))
BEGIN
    ALTER TABLE [dbo].[outbox] ADD [bucket] TINYINT NULL;
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_outbox_bucket_fresh' AND object_id = OBJECT_ID(N'[dbo].[outbox]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_outbox_bucket_fresh] ON [dbo].[outbox] ([bucket], [id]) INCLUDE ([aggregate_id]) WHERE [status] = 0 AND [next_retry_at] IS NULL;
END;
