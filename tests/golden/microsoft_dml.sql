-- ack ['[1, 2, 3]', '2026-11-21 12:00:00.123']
UPDATE [messaging].[outbox] SET [status] = 2, [processed_at] = SYSUTCDATETIME() WHERE [id] IN (SELECT [id] FROM OPENJSON(%s) WITH ([id] BIGINT '$')) AND [status] = 1 AND [claimed_at] = CAST(%s AS DATETIME2(3));

-- fail [4, 1500, 10, 3000, 4, 'nack', 10, 'unroutable', '[4, 10]', '2026-11-21 12:00:00.123']
UPDATE [messaging].[outbox] SET [attempts] = [attempts] + 1, [status] = 3, [next_retry_at] = CASE [id] WHEN %s THEN DATEADD(MILLISECOND, %s, SYSUTCDATETIME()) WHEN %s THEN DATEADD(MILLISECOND, %s, SYSUTCDATETIME()) END, [last_error] = CASE [id] WHEN %s THEN %s WHEN %s THEN %s END WHERE [id] IN (SELECT [id] FROM OPENJSON(%s) WITH ([id] BIGINT '$')) AND [status] = 1 AND [claimed_at] = CAST(%s AS DATETIME2(3));

-- bury [5, 1, 11, 0, 5, 'poison', 11, 'too large', '[5, 11]', '2026-11-21 12:00:00.123']
UPDATE [messaging].[outbox] SET [attempts] = [attempts] + (CASE [id] WHEN %s THEN %s WHEN %s THEN %s END), [status] = 4, [processed_at] = SYSUTCDATETIME(), [next_retry_at] = NULL, [last_error] = CASE [id] WHEN %s THEN %s WHEN %s THEN %s END WHERE [id] IN (SELECT [id] FROM OPENJSON(%s) WITH ([id] BIGINT '$')) AND [status] = 1 AND [claimed_at] = CAST(%s AS DATETIME2(3));

-- release ['[6, 7]', '2026-11-21 12:00:00.123']
UPDATE [messaging].[outbox] SET [status] = 0, [claimed_at] = NULL, [next_retry_at] = NULL WHERE [id] IN (SELECT [id] FROM OPENJSON(%s) WITH ([id] BIGINT '$')) AND [status] = 1 AND [claimed_at] = CAST(%s AS DATETIME2(3));

-- renew [60000, '[8, 9]', '2026-11-21 12:00:00.123']
UPDATE [messaging].[outbox] WITH (READCOMMITTEDLOCK, READPAST, ROWLOCK) SET [next_retry_at] = DATEADD(MILLISECOND, %s, SYSUTCDATETIME()) WHERE [id] IN (SELECT [id] FROM OPENJSON(%s) WITH ([id] BIGINT '$')) AND [status] = 1 AND [claimed_at] = CAST(%s AS DATETIME2(3));

-- purge [1000, '2026-11-14 00:00:00']
DELETE TOP (%s) FROM [messaging].[outbox] WITH (READCOMMITTEDLOCK, READPAST, ROWLOCK) WHERE [status] IN (2, 4) AND [processed_at] < CAST(%s AS DATETIME2(3));

-- insert []
INSERT INTO [messaging].[outbox] ([message_id], [topic], [aggregate_type], [aggregate_id], [partition_key], [payload], [headers], [trace_id], [bucket]) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s), (%s, %s, %s, %s, %s, %s, %s, %s, %s);

-- unbucketed [1000]
SELECT TOP (%s) f.[id], f.[aggregate_id]
                FROM [messaging].[outbox] AS f WITH (READCOMMITTEDLOCK, READPAST)
                WHERE f.[bucket] IS NULL AND f.[status] = 0 AND f.[next_retry_at] IS NULL
                ORDER BY f.[id];

-- fill_bucket ['agg-7', 214, 'agg-9', 3, 'agg-7', 'agg-9']
UPDATE [messaging].[outbox] SET [bucket] = CASE [aggregate_id] WHEN %s THEN %s WHEN %s THEN %s END WHERE [aggregate_id] IN (%s, %s) AND [status] IN (0, 1, 3) AND [status] = 0 AND [next_retry_at] IS NULL AND [bucket] IS NULL;

-- stored_message_ids ['m-1', 'm-2']
SELECT [message_id] FROM [messaging].[outbox] WHERE [message_id] IN (%s, %s);

