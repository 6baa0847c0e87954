IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_outbox_bucket_fresh' AND object_id = OBJECT_ID(N'[dbo].[outbox]', N'U'))
BEGIN
    DROP INDEX [IX_outbox_bucket_fresh] ON [dbo].[outbox];
END;
IF EXISTS (SELECT 1 FROM sys.columns WHERE name = N'bucket' AND object_id = OBJECT_ID(N'[dbo].[outbox]', N'U'))
BEGIN
    ALTER TABLE [dbo].[outbox] DROP COLUMN [bucket];
END;
