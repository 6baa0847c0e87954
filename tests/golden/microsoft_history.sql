-- freeze []
SELECT [topic], [status], COUNT(*), MIN([id]), MAX([id]), SUM(CAST([id] AS DECIMAL(38, 0))), SUM(CAST(([id] % 65521) * ([id] % 65519) AS DECIMAL(38, 0))) FROM [messaging].[outbox] WHERE [status] IN (2, 4) AND [processed_at] < CAST('2026-11-20T08:30:15.123' AS DATETIME2(3)) AND NOT (([id] <= 1000 AND [processed_at] < CAST('2026-11-19T08:30:15.123' AS DATETIME2(3)) AND [status] IN (2))) AND [id] >= 1001 AND [id] <= 250000 GROUP BY [topic], [status];

-- source []
(SELECT [id], [message_id], [topic], [aggregate_type], [aggregate_id], [partition_key], [payload], [headers], [trace_id], [status], [attempts], CONVERT(VARCHAR(23), [claimed_at], 121) AS [claimed_at], CONVERT(VARCHAR(23), [next_retry_at], 121) AS [next_retry_at], CONVERT(VARCHAR(23), [created_at], 121) AS [created_at], CONVERT(VARCHAR(23), [processed_at], 121) AS [processed_at], [last_error], [schema_version] FROM [messaging].[outbox] WHERE [status] IN (2, 4) AND [processed_at] < CAST('2026-11-20T08:30:15.123' AS DATETIME2(3)) AND NOT (([id] <= 1000 AND [processed_at] < CAST('2026-11-19T08:30:15.123' AS DATETIME2(3)) AND [status] IN (2))) AND [id] >= 1001 AND [id] <= 250000) eventferry_source;

-- purge_archived ['[[7, "2026-11-20T08:30:15.123"], [9, "2026-11-20T08:30:14.123"]]']
DELETE o FROM [messaging].[outbox] AS o WITH (ROWLOCK, READCOMMITTEDLOCK) JOIN OPENJSON(%s) WITH ([id] BIGINT '$[0]', [processed_at] DATETIME2(3) '$[1]') AS a ON a.[id] = o.[id] AND a.[processed_at] = o.[processed_at] WHERE o.[status] IN (2, 4);

