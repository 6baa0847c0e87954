-- 0.1.0 outbox forwards
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

-- 0.1.0 outbox backwards
DROP TABLE IF EXISTS [messaging].[events];

-- 0.1.0 inbox forwards
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

-- 0.1.0 inbox backwards
DROP TABLE IF EXISTS [messaging].[handled];

-- 0.1.0 relays forwards
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

-- 0.1.0 relays backwards
DROP TABLE IF EXISTS [messaging].[events_relays];

-- 0.1.0 task_results forwards
IF OBJECT_ID(N'[messaging].[events_task_results]', N'U') IS NULL
BEGIN
    CREATE TABLE [messaging].[events_task_results] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [result_id] NVARCHAR(64) NOT NULL,
        [task_path] NVARCHAR(255) NOT NULL,
        [backend] NVARCHAR(255) NOT NULL,
        [queue_name] NVARCHAR(255) NOT NULL,
        [priority] INT NOT NULL CONSTRAINT [DF_events_task_results_priority] DEFAULT (0),
        [status] NVARCHAR(64) NOT NULL,
        [arguments] NVARCHAR(MAX) NOT NULL,
        [run_after] DATETIME2(3) NULL,
        [enqueued_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_events_task_results_enqueued_at] DEFAULT (SYSUTCDATETIME()),
        [started_at] DATETIME2(3) NULL,
        [last_attempted_at] DATETIME2(3) NULL,
        [finished_at] DATETIME2(3) NULL,
        [attempts] INT NOT NULL CONSTRAINT [DF_events_task_results_attempts] DEFAULT (0),
        [worker_ids] NVARCHAR(MAX) NULL,
        [return_value] NVARCHAR(MAX) NULL,
        [errors] NVARCHAR(MAX) NULL,
        CONSTRAINT [PK_events_task_results] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_events_task_results_result_id] UNIQUE ([result_id]),
        CONSTRAINT [CK_events_task_results_arguments_json] CHECK (ISJSON([arguments]) = 1),
        CONSTRAINT [CK_events_task_results_worker_ids_json] CHECK ([worker_ids] IS NULL OR ISJSON([worker_ids]) = 1),
        CONSTRAINT [CK_events_task_results_return_value_json] CHECK ([return_value] IS NULL OR ISJSON([return_value]) = 1),
        CONSTRAINT [CK_events_task_results_errors_json] CHECK ([errors] IS NULL OR ISJSON([errors]) = 1)
    );
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_events_task_results_status_finished_at' AND object_id = OBJECT_ID(N'[messaging].[events_task_results]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_events_task_results_status_finished_at] ON [messaging].[events_task_results] ([status], [finished_at]);
END;

-- 0.1.0 task_results backwards
DROP TABLE IF EXISTS [messaging].[events_task_results];

