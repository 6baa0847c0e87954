-- 0001_initial forwards
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
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_done_processed_at' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_events_done_processed_at] ON [messaging].[events] ([status], [processed_at]);
END;

-- 0001_initial backwards
DROP TABLE IF EXISTS [messaging].[events];

-- 0004_inbox forwards
IF OBJECT_ID(N'[messaging].[handled]', N'U') IS NULL
BEGIN
    CREATE TABLE [messaging].[handled] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [consumer] NVARCHAR(255) NOT NULL,
        [message_id] NVARCHAR(64) NOT NULL,
        [handled_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_handled_handled_at] DEFAULT (SYSUTCDATETIME()),
        CONSTRAINT [PK_handled] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_handled_consumer_message_id] UNIQUE ([consumer], [message_id])
    );
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_handled_handled_at' AND object_id = OBJECT_ID(N'[messaging].[handled]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_handled_handled_at] ON [messaging].[handled] ([handled_at]);
END;

-- 0004_inbox backwards
DROP TABLE IF EXISTS [messaging].[handled];

-- 0005_open_rows_index forwards
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_agg_open' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_events_agg_open] ON [messaging].[events] ([aggregate_id], [id]) WHERE [status] IN (0, 1, 3);
END;
IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_agg_id_id' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    DROP INDEX [IX_events_agg_id_id] ON [messaging].[events];
END;

-- 0005_open_rows_index backwards
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_agg_id_id' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_events_agg_id_id] ON [messaging].[events] ([aggregate_id], [id]) INCLUDE ([status]);
END;
IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_agg_open' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    DROP INDEX [IX_events_agg_open] ON [messaging].[events];
END;

-- 0006_outbox_autovacuum forwards


-- 0006_outbox_autovacuum backwards


-- 0007_closed_rows_index forwards
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_closed_rows' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_events_closed_rows] ON [messaging].[events] ([status], [processed_at]) WHERE [status] IN (2, 4);
END;
IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_done_processed_at' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    DROP INDEX [IX_events_done_processed_at] ON [messaging].[events];
END;

-- 0007_closed_rows_index backwards
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_done_processed_at' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_events_done_processed_at] ON [messaging].[events] ([status], [processed_at]);
END;
IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_closed_rows' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    DROP INDEX [IX_events_closed_rows] ON [messaging].[events];
END;

-- 0008_schema_version forwards
IF NOT EXISTS (SELECT 1 FROM sys.columns WHERE name = N'schema_version' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    ALTER TABLE [messaging].[events] ADD [schema_version] NVARCHAR(255) NULL;
END;

-- 0008_schema_version backwards
IF EXISTS (SELECT 1 FROM sys.columns WHERE name = N'schema_version' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    ALTER TABLE [messaging].[events] DROP COLUMN [schema_version];
END;

-- 0009_relay_registry forwards
IF OBJECT_ID(N'[messaging].[events_relays]', N'U') IS NULL
BEGIN
    CREATE TABLE [messaging].[events_relays] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [instance] NVARCHAR(64) NOT NULL,
        [relay_id] NVARCHAR(255) NOT NULL,
        [seen_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_events_relays_seen_at] DEFAULT (SYSUTCDATETIME()),
        CONSTRAINT [PK_events_relays] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_events_relays_instance] UNIQUE ([instance])
    );
END;

-- 0009_relay_registry backwards
DROP TABLE IF EXISTS [messaging].[events_relays];

-- 0010_claim_buckets forwards
IF NOT EXISTS (SELECT 1 FROM sys.columns WHERE name = N'bucket' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    ALTER TABLE [messaging].[events] ADD [bucket] TINYINT NULL;
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_bucket_fresh' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_events_bucket_fresh] ON [messaging].[events] ([bucket], [id]) INCLUDE ([aggregate_id]) WHERE [status] = 0 AND [next_retry_at] IS NULL;
END;

-- 0010_claim_buckets backwards
IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_bucket_fresh' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    DROP INDEX [IX_events_bucket_fresh] ON [messaging].[events];
END;
IF EXISTS (SELECT 1 FROM sys.columns WHERE name = N'bucket' AND object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    ALTER TABLE [messaging].[events] DROP COLUMN [bucket];
END;

