IF OBJECT_ID(N'[dbo].[inbox]', N'U') IS NULL
BEGIN
    CREATE TABLE [dbo].[inbox] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [consumer] NVARCHAR(255) NOT NULL,
        [message_id] NVARCHAR(64) NOT NULL,
        [handled_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_inbox_handled_at] DEFAULT (SYSUTCDATETIME()),
        CONSTRAINT [PK_inbox] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_inbox_consumer_message_id] UNIQUE ([consumer], [message_id])
    );
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_inbox_handled_at' AND object_id = OBJECT_ID(N'[dbo].[inbox]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_inbox_handled_at] ON [dbo].[inbox] ([handled_at]);
END;
