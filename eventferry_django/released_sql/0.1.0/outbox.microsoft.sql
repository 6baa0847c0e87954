-- Release 0.1.0 on microsoft: the outbox table and its indexes.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
IF OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U') IS NULL
BEGIN
    CREATE TABLE {{schema_prefix}}[{{table}}] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [message_id] NVARCHAR(64) NOT NULL,
        [topic] NVARCHAR(255) NOT NULL,
        [aggregate_type] NVARCHAR(255) NOT NULL,
        [aggregate_id] NVARCHAR(255) NOT NULL,
        [partition_key] NVARCHAR(255) NULL,
        [payload] NVARCHAR(MAX) NOT NULL,
        [headers] NVARCHAR(MAX) NOT NULL CONSTRAINT [DF_{{table}}_headers] DEFAULT (N'{}'),
        [trace_id] NVARCHAR(255) NULL,
        [status] TINYINT NOT NULL CONSTRAINT [DF_{{table}}_status] DEFAULT (0),
        [attempts] INT NOT NULL CONSTRAINT [DF_{{table}}_attempts] DEFAULT (0),
        [claimed_at] DATETIME2(3) NULL,
        [next_retry_at] DATETIME2(3) NULL,
        [created_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_{{table}}_created_at] DEFAULT (SYSUTCDATETIME()),
        [processed_at] DATETIME2(3) NULL,
        [last_error] NVARCHAR(4000) NULL,
        [schema_version] NVARCHAR(255) NULL,
        [bucket] TINYINT NULL,
        CONSTRAINT [PK_{{table}}] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_{{table}}_message_id] UNIQUE ([message_id]),
        CONSTRAINT [CK_{{table}}_payload_json] CHECK (ISJSON([payload]) = 1),
        CONSTRAINT [CK_{{table}}_headers_json] CHECK (ISJSON([headers]) = 1),
        CONSTRAINT [CK_{{table}}_status] CHECK ([status] IN (0, 1, 2, 3, 4)),
        CONSTRAINT [CK_{{table}}_claimed_at] CHECK ([status] <> 1 OR [claimed_at] IS NOT NULL)
    );
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_agg_open' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_{{table}}_agg_open] ON {{schema_prefix}}[{{table}}] ([aggregate_id], [id]) WHERE [status] IN (0, 1, 3);
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_claim_ready' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_{{table}}_claim_ready] ON {{schema_prefix}}[{{table}}] ([status], [next_retry_at], [id]) INCLUDE ([aggregate_id], [claimed_at]) WHERE [status] IN (0, 1, 3);
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_closed_rows' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_{{table}}_closed_rows] ON {{schema_prefix}}[{{table}}] ([status], [processed_at]) WHERE [status] IN (2, 4);
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_bucket_fresh' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_{{table}}_bucket_fresh] ON {{schema_prefix}}[{{table}}] ([bucket], [id]) INCLUDE ([aggregate_id]) WHERE [status] = 0 AND [next_retry_at] IS NULL;
END;
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}[{{table}}];
