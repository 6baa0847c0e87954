-- purge_selection []
DELETE FROM [messaging].[outbox] WITH (ROWLOCK, READCOMMITTEDLOCK) WHERE [status] IN (2, 4) AND [processed_at] < CAST('2026-11-20T08:30:15.123' AS DATETIME2(3)) AND NOT (([id] <= 1000 AND [processed_at] < CAST('2026-11-19T08:30:15.123' AS DATETIME2(3)) AND [status] IN (2))) AND [id] >= 4001 AND [id] <= 8000;
