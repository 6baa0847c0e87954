IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_outbox_done_processed_at' AND object_id = OBJECT_ID(N'[dbo].[outbox]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_outbox_done_processed_at] ON [dbo].[outbox] ([status], [processed_at]);
END;
IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_outbox_closed_rows' AND object_id = OBJECT_ID(N'[dbo].[outbox]', N'U'))
BEGIN
    DROP INDEX [IX_outbox_closed_rows] ON [dbo].[outbox];
END;
