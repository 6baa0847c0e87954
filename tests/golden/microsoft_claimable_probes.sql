-- fresh
SELECT TOP (1) c.[id], c.[created_at] FROM [dbo].[outbox] AS c WHERE c.[status] = 0 AND c.[next_retry_at] IS NULL AND NOT EXISTS (SELECT 1 FROM [dbo].[outbox] e WITH (READCOMMITTEDLOCK) WHERE e.[aggregate_id] = c.[aggregate_id] AND e.[status] IN (0, 1, 3) AND e.[id] < c.[id]) ORDER BY c.[status], c.[next_retry_at], c.[id];
-- scheduled
SELECT TOP (1) c.[id], c.[next_retry_at] FROM [dbo].[outbox] AS c WHERE c.[status] = 0 AND c.[next_retry_at] <= SYSUTCDATETIME() AND NOT EXISTS (SELECT 1 FROM [dbo].[outbox] e WITH (READCOMMITTEDLOCK) WHERE e.[aggregate_id] = c.[aggregate_id] AND e.[status] IN (0, 1, 3) AND e.[id] < c.[id]) ORDER BY c.[status], c.[next_retry_at], c.[id];
-- retry
SELECT TOP (1) c.[id], c.[next_retry_at] FROM [dbo].[outbox] AS c WHERE c.[status] = 3 AND c.[next_retry_at] <= SYSUTCDATETIME() AND NOT EXISTS (SELECT 1 FROM [dbo].[outbox] e WITH (READCOMMITTEDLOCK) WHERE e.[aggregate_id] = c.[aggregate_id] AND e.[status] IN (0, 1, 3) AND e.[id] < c.[id]) ORDER BY c.[status], c.[next_retry_at], c.[id];
