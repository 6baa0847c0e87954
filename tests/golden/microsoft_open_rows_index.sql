IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_outbox_agg_open' AND object_id = OBJECT_ID(N'[dbo].[outbox]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_outbox_agg_open] ON [dbo].[outbox] ([aggregate_id], [id]) WHERE [status] IN (0, 1, 3);
END;
IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_outbox_agg_id_id' AND object_id = OBJECT_ID(N'[dbo].[outbox]', N'U'))
BEGIN
    DROP INDEX [IX_outbox_agg_id_id] ON [dbo].[outbox];
END;
