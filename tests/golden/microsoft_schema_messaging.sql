IF OBJECT_ID(N'[messaging].[events]', N'U') IS NULL
BEGIN
    CREATE TABLE [messaging].[events] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [message_id] NVARCHAR(64) NOT NULL,
        [topic] NVARCHAR(255) NOT NULL,
        [aggregate_type] NVARCHAR(255) NOT NULL,
        [aggregate_id] NVARCHAR(255) NOT NULL,
        [partition_key] NVARCHAR(255) NULL,
        [payload] NVARCHAR(MAX) NOT NULL,
        [headers] NVARCHAR(MAX) NOT NULL CONSTRAINT [DF_events_headers] DEFAULT (N'{}'),
        [trace_id] NVARCHAR(255) NULL,
        [status] TINYINT NOT NULL CONSTRAINT [DF_events_status] DEFAULT (0),
        [attempts] INT NOT NULL CONSTRAINT [DF_events_attempts] DEFAULT (0),
        [claimed_at] DATETIME2(3) NULL,
        [next_retry_at] DATETIME2(3) NULL,
        [created_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_events_created_at] DEFAULT (SYSUTCDATETIME()),
        [processed_at] DATETIME2(3) NULL,
        [last_error] NVARCHAR(4000) NULL,
        [schema_version] NVARCHAR(255) NULL,
        [bucket] TINYINT NULL,
        CONSTRAINT [PK_events] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_events_message_id] UNIQUE ([message_id]),
        CONSTRAINT [CK_events_payload_json] CHECK (ISJSON([payload]) = 1),
        CONSTRAINT [CK_events_headers_json] CHECK (ISJSON([headers]) = 1),
        CONSTRAINT [CK_events_status] CHECK ([status] IN (0, 1, 2, 3, 4)),
        CONSTRAINT [CK_events_claimed_at] CHECK ([status] <> 1 OR [claimed_at] IS NOT NULL)
    );
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_agg_open' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_events_agg_open] ON [messaging].[events] ([aggregate_id], [id]) WHERE [status] IN (0, 1, 3);
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_claim_ready' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_events_claim_ready] ON [messaging].[events] ([status], [next_retry_at], [id]) INCLUDE ([aggregate_id], [claimed_at]) WHERE [status] IN (0, 1, 3);
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_closed_rows' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_events_closed_rows] ON [messaging].[events] ([status], [processed_at]) WHERE [status] IN (2, 4);
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_bucket_fresh' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_events_bucket_fresh] ON [messaging].[events] ([bucket], [id]) INCLUDE ([aggregate_id]) WHERE [status] = 0 AND [next_retry_at] IS NULL;
END;
