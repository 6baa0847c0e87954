-- 0.2.0 buckets forwards
IF OBJECT_ID(N'[messaging].[events_buckets]', N'U') IS NULL
BEGIN
    CREATE TABLE [messaging].[events_buckets] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [bucket] TINYINT NOT NULL,
        [owner] NVARCHAR(64) NULL,
        [epoch] INT NOT NULL CONSTRAINT [DF_events_buckets_epoch] DEFAULT (0),
        [expires_at] DATETIME2(3) NULL,
        CONSTRAINT [PK_events_buckets] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_events_buckets_bucket] UNIQUE ([bucket])
    );
END;
INSERT INTO [messaging].[events_buckets] ([bucket]) SELECT h.d * 16 + l.d FROM (SELECT 0 AS d UNION ALL SELECT 1 AS d UNION ALL SELECT 2 AS d UNION ALL SELECT 3 AS d UNION ALL SELECT 4 AS d UNION ALL SELECT 5 AS d UNION ALL SELECT 6 AS d UNION ALL SELECT 7 AS d UNION ALL SELECT 8 AS d UNION ALL SELECT 9 AS d UNION ALL SELECT 10 AS d UNION ALL SELECT 11 AS d UNION ALL SELECT 12 AS d UNION ALL SELECT 13 AS d UNION ALL SELECT 14 AS d UNION ALL SELECT 15 AS d) h CROSS JOIN (SELECT 0 AS d UNION ALL SELECT 1 AS d UNION ALL SELECT 2 AS d UNION ALL SELECT 3 AS d UNION ALL SELECT 4 AS d UNION ALL SELECT 5 AS d UNION ALL SELECT 6 AS d UNION ALL SELECT 7 AS d UNION ALL SELECT 8 AS d UNION ALL SELECT 9 AS d UNION ALL SELECT 10 AS d UNION ALL SELECT 11 AS d UNION ALL SELECT 12 AS d UNION ALL SELECT 13 AS d UNION ALL SELECT 14 AS d UNION ALL SELECT 15 AS d) l WHERE h.d * 16 + l.d < 256 AND NOT EXISTS (SELECT 1 FROM [messaging].[events_buckets] e WHERE e.[bucket] = h.d * 16 + l.d);

-- 0.2.0 buckets backwards
DROP TABLE IF EXISTS [messaging].[events_buckets];

-- 0.2.0 in_flight forwards
IF OBJECT_ID(N'[messaging].[events_in_flight]', N'U') IS NULL
BEGIN
    CREATE TABLE [messaging].[events_in_flight] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [relay] NVARCHAR(64) NOT NULL,
        [batch] INT NOT NULL,
        [claimed_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_events_in_flight_claimed_at] DEFAULT (SYSUTCDATETIME()),
        [event_count] INT NOT NULL,
        [taken] INT NOT NULL CONSTRAINT [DF_events_in_flight_taken] DEFAULT (0),
        [events] NVARCHAR(MAX) NOT NULL,
        CONSTRAINT [PK_events_in_flight] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_events_in_flight_batch] UNIQUE ([relay], [batch])
    );
END;

-- 0.2.0 in_flight backwards
DROP TABLE IF EXISTS [messaging].[events_in_flight];

-- 0.2.0 outbox forwards
UPDATE [messaging].[events] SET [status] = 0, [claimed_at] = NULL, [next_retry_at] = NULL WHERE [status] = 1;
IF NOT EXISTS (SELECT 1 FROM sys.check_constraints WHERE name = N'CK_events_claimed_needs_0_2' AND parent_object_id = OBJECT_ID(N'[messaging].[events]', N'U'))
BEGIN
    ALTER TABLE [messaging].[events] ADD CONSTRAINT [CK_events_claimed_needs_0_2] CHECK ([status] <> 1);
END;

-- 0.2.0 outbox backwards
ALTER TABLE [messaging].[events] DROP CONSTRAINT IF EXISTS [CK_events_claimed_needs_0_2];

