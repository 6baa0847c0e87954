-- The claim on microsoft, statement by statement, for the outbox named "outbox":
-- what eventferry_django/store/microsoft.py (MicrosoftClaim) sends. Each
-- %(name)s is a value bound by name (see eventferry_django/store/claim.py).
-- Written by the code and kept equal to it by tests/test_claim_sql.py: never
-- edit it; after a change to the claim run
-- EVENTFERRY_UPDATE_GOLDEN=1 pytest tests/test_claim_sql.py, and review the diff.

-- name: claim
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @claimed TABLE (
    [id] BIGINT NOT NULL PRIMARY KEY,
    [message_id] NVARCHAR(64) NOT NULL,
    [topic] NVARCHAR(255) NOT NULL,
    [aggregate_type] NVARCHAR(255) NOT NULL,
    [aggregate_id] NVARCHAR(255) NOT NULL,
    [partition_key] NVARCHAR(255) NULL,
    [payload] NVARCHAR(MAX) NOT NULL,
    [headers] NVARCHAR(MAX) NOT NULL,
    [trace_id] NVARCHAR(255) NULL,
    [attempts] INT NOT NULL,
    [claimed_at] DATETIME2(3) NOT NULL,
    [created_at] DATETIME2(3) NOT NULL,
    [schema_version] NVARCHAR(255) NULL
);
DECLARE @candidates TABLE (
    [id] BIGINT NOT NULL PRIMARY KEY
);
DECLARE @heads TABLE (
    [id] BIGINT NOT NULL PRIMARY KEY,
    [aggregate_id] NVARCHAR(255) NOT NULL
);
DECLARE @taken INT;
BEGIN TRY
    BEGIN TRANSACTION;
    INSERT INTO @candidates ([id])
        SELECT w.[id] FROM (
            SELECT TOP (%(window)s) f.[id]
            FROM [dbo].[outbox] AS f WITH (READCOMMITTEDLOCK, READPAST)
            WHERE f.[status] = 0 AND f.[next_retry_at] IS NULL
            ORDER BY f.[id]
        ) AS w
        UNION ALL
        SELECT d.[id] FROM (
            SELECT TOP (%(heads)s) o.[id]
            FROM [dbo].[outbox] AS o WITH (READCOMMITTEDLOCK, READPAST)
            WHERE ((o.[status] = 3 AND (o.[next_retry_at] IS NULL OR o.[next_retry_at] <= SYSUTCDATETIME())) OR (o.[status] = 0 AND o.[next_retry_at] <= SYSUTCDATETIME()) OR (o.[status] = 1 AND o.[claimed_at] < DATEADD(MILLISECOND, %(lease_offset)s, SYSUTCDATETIME()) AND (o.[next_retry_at] IS NULL OR o.[next_retry_at] <= SYSUTCDATETIME())))
            ORDER BY o.[id]
        ) AS d
        OPTION (MAXDOP 1);
    INSERT INTO @heads ([id], [aggregate_id])
        SELECT TOP (%(heads)s) c.[id], c.[aggregate_id]
        FROM @candidates AS k
        JOIN [dbo].[outbox] AS c WITH (READCOMMITTEDLOCK, READPAST, UPDLOCK, ROWLOCK) ON c.[id] = k.[id]
        WHERE ((c.[status] = 0 AND c.[next_retry_at] IS NULL) OR ((c.[status] = 3 AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())) OR (c.[status] = 0 AND c.[next_retry_at] <= SYSUTCDATETIME()) OR (c.[status] = 1 AND c.[claimed_at] < DATEADD(MILLISECOND, %(lease_offset)s, SYSUTCDATETIME()) AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())))) AND NOT EXISTS (SELECT 1 FROM [dbo].[outbox] e WITH (READCOMMITTEDLOCK) WHERE e.[aggregate_id] = c.[aggregate_id] AND e.[status] IN (0, 1, 3) AND e.[id] < c.[id])
        ORDER BY k.[id]
        OPTION (MAXDOP 1);
    SELECT @taken = COUNT(*) FROM @heads;
    UPDATE o SET o.[attempts] = o.[attempts] + CASE WHEN o.[status] = 1 THEN 1 ELSE 0 END, o.[status] = 1, o.[claimed_at] = SYSUTCDATETIME()
    OUTPUT inserted.[id], inserted.[message_id], inserted.[topic], inserted.[aggregate_type], inserted.[aggregate_id], inserted.[partition_key], inserted.[payload], inserted.[headers], inserted.[trace_id], inserted.[attempts], inserted.[claimed_at], inserted.[created_at], inserted.[schema_version] INTO @claimed
    FROM [dbo].[outbox] AS o
    JOIN (
        SELECT TOP (%(limit)s) x.[id] FROM (
            SELECT h.[id] FROM @heads AS h
            UNION ALL
            SELECT r.[id] FROM (
                SELECT k.[id], k.[aggregate_id], ROW_NUMBER() OVER (ORDER BY k.[id]) AS [rank] FROM @heads AS k
            ) AS h CROSS APPLY (
                SELECT TOP (CASE WHEN (%(limit)s - h.[rank]) / @taken < %(max_chain)s - 1 THEN (%(limit)s - h.[rank]) / @taken ELSE %(max_chain)s - 1 END) c.[id], MIN(CASE WHEN ((c.[status] = 0 AND c.[next_retry_at] IS NULL) OR ((c.[status] = 3 AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())) OR (c.[status] = 0 AND c.[next_retry_at] <= SYSUTCDATETIME()) OR (c.[status] = 1 AND c.[claimed_at] < DATEADD(MILLISECOND, %(lease_offset)s, SYSUTCDATETIME()) AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())))) THEN 1 ELSE 0 END) OVER (ORDER BY c.[id] ROWS UNBOUNDED PRECEDING) AS unbroken
                FROM [dbo].[outbox] AS c WITH (READCOMMITTEDLOCK, UPDLOCK, ROWLOCK)
                WHERE c.[aggregate_id] = h.[aggregate_id] AND c.[status] IN (0, 1, 3) AND c.[id] > h.[id]
                ORDER BY c.[id]
            ) AS r WHERE r.unbroken = 1
        ) AS x ORDER BY x.[id]
    ) AS picked ON picked.[id] = o.[id]
    OPTION (MAXDOP 1);
    COMMIT TRANSACTION;
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
    SET NOCOUNT OFF;
    SET XACT_ABORT OFF;
    THROW;
END CATCH;
SELECT [id], [message_id], [topic], [aggregate_type], [aggregate_id], [partition_key], [payload], [headers], [trace_id], [attempts], [claimed_at], [created_at], [schema_version] FROM @claimed ORDER BY [id];
SET NOCOUNT OFF;
SET XACT_ABORT OFF;

-- name: claim_by_bucket
SET NOCOUNT ON;
SET XACT_ABORT ON;
DECLARE @claimed TABLE (
    [id] BIGINT NOT NULL PRIMARY KEY,
    [message_id] NVARCHAR(64) NOT NULL,
    [topic] NVARCHAR(255) NOT NULL,
    [aggregate_type] NVARCHAR(255) NOT NULL,
    [aggregate_id] NVARCHAR(255) NOT NULL,
    [partition_key] NVARCHAR(255) NULL,
    [payload] NVARCHAR(MAX) NOT NULL,
    [headers] NVARCHAR(MAX) NOT NULL,
    [trace_id] NVARCHAR(255) NULL,
    [attempts] INT NOT NULL,
    [claimed_at] DATETIME2(3) NOT NULL,
    [created_at] DATETIME2(3) NOT NULL,
    [schema_version] NVARCHAR(255) NULL
);
DECLARE @candidates TABLE (
    [id] BIGINT NOT NULL PRIMARY KEY
);
DECLARE @heads TABLE (
    [id] BIGINT NOT NULL PRIMARY KEY,
    [aggregate_id] NVARCHAR(255) NOT NULL
);
DECLARE @taken INT;
BEGIN TRY
    BEGIN TRANSACTION;
    INSERT INTO @candidates ([id])
        SELECT x.[id] FROM (
            SELECT w.[id], ROW_NUMBER() OVER (
                PARTITION BY w.[aggregate_id] ORDER BY w.[id]) AS [first]
            FROM (
                SELECT f.[id], f.[aggregate_id]
                FROM OPENJSON(%(buckets)s) WITH ([bucket] TINYINT '$') AS b
                CROSS APPLY (
                SELECT TOP (%(window)s) f.[id], f.[aggregate_id]
                FROM [dbo].[outbox] AS f WITH (READCOMMITTEDLOCK, READPAST)
                WHERE f.[bucket] = b.[bucket] AND f.[status] = 0 AND f.[next_retry_at] IS NULL
                ORDER BY f.[id]
                ) AS f
                UNION ALL
                SELECT n.[id], n.[aggregate_id] FROM (
                SELECT TOP (%(heads)s) f.[id], f.[aggregate_id]
                FROM [dbo].[outbox] AS f WITH (READCOMMITTEDLOCK, READPAST)
                WHERE f.[bucket] IS NULL AND f.[status] = 0 AND f.[next_retry_at] IS NULL
                ORDER BY f.[id]
                ) AS n
            ) AS w
        ) AS x
        WHERE x.[first] = 1
        UNION ALL
        SELECT d.[id] FROM (
            SELECT TOP (%(heads)s) o.[id]
            FROM [dbo].[outbox] AS o WITH (READCOMMITTEDLOCK, READPAST)
            WHERE ((o.[status] = 3 AND (o.[next_retry_at] IS NULL OR o.[next_retry_at] <= SYSUTCDATETIME())) OR (o.[status] = 0 AND o.[next_retry_at] <= SYSUTCDATETIME()) OR (o.[status] = 1 AND o.[claimed_at] < DATEADD(MILLISECOND, %(lease_offset)s, SYSUTCDATETIME()) AND (o.[next_retry_at] IS NULL OR o.[next_retry_at] <= SYSUTCDATETIME())))
            ORDER BY o.[id]
        ) AS d
        OPTION (MAXDOP 1);
    INSERT INTO @heads ([id], [aggregate_id])
        SELECT TOP (%(heads)s) c.[id], c.[aggregate_id]
        FROM @candidates AS k
        JOIN [dbo].[outbox] AS c WITH (READCOMMITTEDLOCK, READPAST, UPDLOCK, ROWLOCK) ON c.[id] = k.[id]
        WHERE ((c.[status] = 0 AND c.[next_retry_at] IS NULL) OR ((c.[status] = 3 AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())) OR (c.[status] = 0 AND c.[next_retry_at] <= SYSUTCDATETIME()) OR (c.[status] = 1 AND c.[claimed_at] < DATEADD(MILLISECOND, %(lease_offset)s, SYSUTCDATETIME()) AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())))) AND NOT EXISTS (SELECT 1 FROM [dbo].[outbox] e WITH (READCOMMITTEDLOCK) WHERE e.[aggregate_id] = c.[aggregate_id] AND e.[status] IN (0, 1, 3) AND e.[id] < c.[id])
        ORDER BY k.[id]
        OPTION (MAXDOP 1);
    SELECT @taken = COUNT(*) FROM @heads;
    UPDATE o SET o.[attempts] = o.[attempts] + CASE WHEN o.[status] = 1 THEN 1 ELSE 0 END, o.[status] = 1, o.[claimed_at] = SYSUTCDATETIME()
    OUTPUT inserted.[id], inserted.[message_id], inserted.[topic], inserted.[aggregate_type], inserted.[aggregate_id], inserted.[partition_key], inserted.[payload], inserted.[headers], inserted.[trace_id], inserted.[attempts], inserted.[claimed_at], inserted.[created_at], inserted.[schema_version] INTO @claimed
    FROM [dbo].[outbox] AS o
    JOIN (
        SELECT TOP (%(limit)s) x.[id] FROM (
            SELECT h.[id] FROM @heads AS h
            UNION ALL
            SELECT r.[id] FROM (
                SELECT k.[id], k.[aggregate_id], ROW_NUMBER() OVER (ORDER BY k.[id]) AS [rank] FROM @heads AS k
            ) AS h CROSS APPLY (
                SELECT TOP (CASE WHEN (%(limit)s - h.[rank]) / @taken < %(max_chain)s - 1 THEN (%(limit)s - h.[rank]) / @taken ELSE %(max_chain)s - 1 END) c.[id], MIN(CASE WHEN ((c.[status] = 0 AND c.[next_retry_at] IS NULL) OR ((c.[status] = 3 AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())) OR (c.[status] = 0 AND c.[next_retry_at] <= SYSUTCDATETIME()) OR (c.[status] = 1 AND c.[claimed_at] < DATEADD(MILLISECOND, %(lease_offset)s, SYSUTCDATETIME()) AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())))) THEN 1 ELSE 0 END) OVER (ORDER BY c.[id] ROWS UNBOUNDED PRECEDING) AS unbroken
                FROM [dbo].[outbox] AS c WITH (READCOMMITTEDLOCK, UPDLOCK, ROWLOCK)
                WHERE c.[aggregate_id] = h.[aggregate_id] AND c.[status] IN (0, 1, 3) AND c.[id] > h.[id]
                ORDER BY c.[id]
            ) AS r WHERE r.unbroken = 1
        ) AS x ORDER BY x.[id]
    ) AS picked ON picked.[id] = o.[id]
    OPTION (MAXDOP 1);
    COMMIT TRANSACTION;
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
    SET NOCOUNT OFF;
    SET XACT_ABORT OFF;
    THROW;
END CATCH;
SELECT [id], [message_id], [topic], [aggregate_type], [aggregate_id], [partition_key], [payload], [headers], [trace_id], [attempts], [claimed_at], [created_at], [schema_version] FROM @claimed ORDER BY [id];
SET NOCOUNT OFF;
SET XACT_ABORT OFF;
