IF OBJECT_ID(N'[dbo].[outbox_in_flight]', N'U') IS NULL
BEGIN
    CREATE TABLE [dbo].[outbox_in_flight] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [relay] NVARCHAR(64) NOT NULL,
        [batch] INT NOT NULL,
        [claimed_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_outbox_in_flight_claimed_at] DEFAULT (SYSUTCDATETIME()),
        [event_count] INT NOT NULL,
        [taken] INT NOT NULL CONSTRAINT [DF_outbox_in_flight_taken] DEFAULT (0),
        [events] NVARCHAR(MAX) NOT NULL,
        CONSTRAINT [PK_outbox_in_flight] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_outbox_in_flight_batch] UNIQUE ([relay], [batch])
    );
END;
