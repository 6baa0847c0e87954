IF OBJECT_ID(N'[dbo].[outbox_relays]', N'U') IS NULL
BEGIN
    CREATE TABLE [dbo].[outbox_relays] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [instance] NVARCHAR(64) NOT NULL,
        [relay_id] NVARCHAR(255) NOT NULL,
        [seen_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_outbox_relays_seen_at] DEFAULT (SYSUTCDATETIME()),
        CONSTRAINT [PK_outbox_relays] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_outbox_relays_instance] UNIQUE ([instance])
    );
END;
