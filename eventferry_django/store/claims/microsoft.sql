-- The claim on microsoft, statement by statement, for the outbox named "outbox":
-- what eventferry_django/store/microsoft.py (MicrosoftClaim) sends. Each
-- %(name)s is a value bound by name (see eventferry_django/store/claim.py).
-- Written by the code and kept equal to it by tests/test_claim_sql.py: never
-- edit it; after a change to the claim run
-- EVENTFERRY_UPDATE_GOLDEN=1 pytest tests/test_claim_sql.py, and review the diff.

-- name: claim
SET NOCOUNT ON;
DECLARE @in_flight TABLE (
    [aggregate_id] NVARCHAR(255) NOT NULL PRIMARY KEY
);
DECLARE @candidates TABLE (
    [id] BIGINT NOT NULL PRIMARY KEY
);
DECLARE @heads TABLE (
    [id] BIGINT NOT NULL PRIMARY KEY,
    [aggregate_id] NVARCHAR(255) NOT NULL
);
DECLARE @taken INT;
INSERT INTO @in_flight ([aggregate_id]) SELECT DISTINCT [value] FROM OPENJSON(%(in_flight)s);
INSERT INTO @candidates ([id])
SELECT x.[id] FROM (
    SELECT w.[id], ROW_NUMBER() OVER (
        PARTITION BY w.[aggregate_id] ORDER BY w.[id]) AS [first]
    FROM (
            SELECT TOP (%(window)s) f.[id], f.[aggregate_id]
                FROM [dbo].[outbox] AS f WITH (READCOMMITTEDLOCK, READPAST)
                WHERE f.[status] = 0 AND f.[next_retry_at] IS NULL
                ORDER BY f.[id]
    ) AS w
    WHERE NOT EXISTS (SELECT 1 FROM @in_flight AS i WHERE i.[aggregate_id] = w.[aggregate_id])
) AS x
WHERE x.[first] = 1
UNION ALL
SELECT d.[id] FROM (
    SELECT TOP (%(heads)s) o.[id]
    FROM [dbo].[outbox] AS o WITH (READCOMMITTEDLOCK, READPAST)
    WHERE ((o.[status] = 3 AND (o.[next_retry_at] IS NULL OR o.[next_retry_at] <= SYSUTCDATETIME())) OR (o.[status] = 0 AND o.[next_retry_at] <= SYSUTCDATETIME())) AND NOT EXISTS (SELECT 1 FROM @in_flight AS i WHERE i.[aggregate_id] = o.[aggregate_id])
    ORDER BY o.[id]
) AS d
OPTION (MAXDOP 1);
INSERT INTO @heads ([id], [aggregate_id])
SELECT TOP (%(heads)s) c.[id], c.[aggregate_id]
FROM @candidates AS k
JOIN [dbo].[outbox] AS c WITH (READCOMMITTEDLOCK, READPAST) ON c.[id] = k.[id]
WHERE ((c.[status] = 0 AND c.[next_retry_at] IS NULL) OR ((c.[status] = 3 AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())) OR (c.[status] = 0 AND c.[next_retry_at] <= SYSUTCDATETIME()))) AND NOT EXISTS (SELECT 1 FROM [dbo].[outbox] e WITH (READCOMMITTEDLOCK) WHERE e.[aggregate_id] = c.[aggregate_id] AND e.[status] IN (0, 1, 3) AND e.[id] < c.[id])
ORDER BY k.[id]
OPTION (MAXDOP 1);
SELECT @taken = COUNT(*) FROM @heads;
SET NOCOUNT OFF;
SELECT o.[id], o.[message_id], o.[topic], o.[aggregate_type], o.[aggregate_id], o.[partition_key], o.[payload], o.[headers], o.[trace_id], o.[attempts], o.[created_at], o.[schema_version] FROM [dbo].[outbox] AS o
JOIN (
    SELECT TOP (%(limit)s) x.[id] FROM (
        SELECT h.[id] FROM @heads AS h
        UNION ALL
        SELECT r.[id] FROM (
            SELECT k.[id], k.[aggregate_id], ROW_NUMBER() OVER (ORDER BY k.[id]) AS [rank] FROM @heads AS k
        ) AS h CROSS APPLY (
            SELECT TOP (CASE WHEN (%(limit)s - h.[rank]) / @taken < %(max_chain)s - 1 THEN (%(limit)s - h.[rank]) / @taken ELSE %(max_chain)s - 1 END) c.[id], MIN(CASE WHEN ((c.[status] = 0 AND c.[next_retry_at] IS NULL) OR ((c.[status] = 3 AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())) OR (c.[status] = 0 AND c.[next_retry_at] <= SYSUTCDATETIME()))) THEN 1 ELSE 0 END) OVER (ORDER BY c.[id] ROWS UNBOUNDED PRECEDING) AS unbroken
            FROM [dbo].[outbox] AS c WITH (READCOMMITTEDLOCK)
            WHERE c.[aggregate_id] = h.[aggregate_id] AND c.[status] IN (0, 1, 3) AND c.[id] > h.[id]
            ORDER BY c.[id]
        ) AS r WHERE r.unbroken = 1
    ) AS x ORDER BY x.[id]
) AS picked ON picked.[id] = o.[id]
ORDER BY o.[id]
OPTION (MAXDOP 1);

-- name: claim_by_bucket
SET NOCOUNT ON;
DECLARE @in_flight TABLE (
    [aggregate_id] NVARCHAR(255) NOT NULL PRIMARY KEY
);
DECLARE @candidates TABLE (
    [id] BIGINT NOT NULL PRIMARY KEY
);
DECLARE @heads TABLE (
    [id] BIGINT NOT NULL PRIMARY KEY,
    [aggregate_id] NVARCHAR(255) NOT NULL
);
DECLARE @taken INT;
INSERT INTO @in_flight ([aggregate_id]) SELECT DISTINCT [value] FROM OPENJSON(%(in_flight)s);
INSERT INTO @candidates ([id])
SELECT x.[id] FROM (
    SELECT w.[id], ROW_NUMBER() OVER (
        PARTITION BY w.[aggregate_id] ORDER BY w.[id]) AS [first]
    FROM OPENJSON(%(buckets)s) WITH ([bucket] TINYINT '$') AS b
    CROSS APPLY (
            SELECT TOP (%(window)s) f.[id], f.[aggregate_id]
                FROM [dbo].[outbox] AS f WITH (READCOMMITTEDLOCK, READPAST)
                WHERE f.[bucket] = b.[bucket] AND f.[status] = 0 AND f.[next_retry_at] IS NULL
                ORDER BY f.[id]
    ) AS w
    WHERE NOT EXISTS (SELECT 1 FROM @in_flight AS i WHERE i.[aggregate_id] = w.[aggregate_id])
) AS x
WHERE x.[first] = 1
UNION ALL
SELECT d.[id] FROM (
    SELECT TOP (%(heads)s) o.[id]
    FROM [dbo].[outbox] AS o WITH (READCOMMITTEDLOCK, READPAST)
    WHERE ((o.[status] = 3 AND (o.[next_retry_at] IS NULL OR o.[next_retry_at] <= SYSUTCDATETIME())) OR (o.[status] = 0 AND o.[next_retry_at] <= SYSUTCDATETIME())) AND o.[bucket] IN (SELECT b.[bucket] FROM OPENJSON(%(buckets)s) WITH ([bucket] TINYINT '$') AS b) AND NOT EXISTS (SELECT 1 FROM @in_flight AS i WHERE i.[aggregate_id] = o.[aggregate_id])
    ORDER BY o.[id]
) AS d
OPTION (MAXDOP 1);
INSERT INTO @heads ([id], [aggregate_id])
SELECT TOP (%(heads)s) c.[id], c.[aggregate_id]
FROM @candidates AS k
JOIN [dbo].[outbox] AS c WITH (READCOMMITTEDLOCK, READPAST) ON c.[id] = k.[id]
WHERE ((c.[status] = 0 AND c.[next_retry_at] IS NULL) OR ((c.[status] = 3 AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())) OR (c.[status] = 0 AND c.[next_retry_at] <= SYSUTCDATETIME()))) AND NOT EXISTS (SELECT 1 FROM [dbo].[outbox] e WITH (READCOMMITTEDLOCK) WHERE e.[aggregate_id] = c.[aggregate_id] AND e.[status] IN (0, 1, 3) AND e.[id] < c.[id])
ORDER BY k.[id]
OPTION (MAXDOP 1);
SELECT @taken = COUNT(*) FROM @heads;
SET NOCOUNT OFF;
SELECT o.[id], o.[message_id], o.[topic], o.[aggregate_type], o.[aggregate_id], o.[partition_key], o.[payload], o.[headers], o.[trace_id], o.[attempts], o.[created_at], o.[schema_version] FROM [dbo].[outbox] AS o
JOIN (
    SELECT TOP (%(limit)s) x.[id] FROM (
        SELECT h.[id] FROM @heads AS h
        UNION ALL
        SELECT r.[id] FROM (
            SELECT k.[id], k.[aggregate_id], ROW_NUMBER() OVER (ORDER BY k.[id]) AS [rank] FROM @heads AS k
        ) AS h CROSS APPLY (
            SELECT TOP (CASE WHEN (%(limit)s - h.[rank]) / @taken < %(max_chain)s - 1 THEN (%(limit)s - h.[rank]) / @taken ELSE %(max_chain)s - 1 END) c.[id], MIN(CASE WHEN ((c.[status] = 0 AND c.[next_retry_at] IS NULL) OR ((c.[status] = 3 AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())) OR (c.[status] = 0 AND c.[next_retry_at] <= SYSUTCDATETIME()))) THEN 1 ELSE 0 END) OVER (ORDER BY c.[id] ROWS UNBOUNDED PRECEDING) AS unbroken
            FROM [dbo].[outbox] AS c WITH (READCOMMITTEDLOCK)
            WHERE c.[aggregate_id] = h.[aggregate_id] AND c.[status] IN (0, 1, 3) AND c.[id] > h.[id]
            ORDER BY c.[id]
        ) AS r WHERE r.unbroken = 1
    ) AS x ORDER BY x.[id]
) AS picked ON picked.[id] = o.[id]
ORDER BY o.[id]
OPTION (MAXDOP 1);
