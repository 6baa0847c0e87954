-- claim_partitioned [500, 3, 3, 1, -60000]
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
BEGIN TRY
    BEGIN TRANSACTION;
    UPDATE o SET o.[attempts] = o.[attempts] + CASE WHEN o.[status] = 1 THEN 1 ELSE 0 END, o.[status] = 1, o.[claimed_at] = SYSUTCDATETIME()
    OUTPUT inserted.[id], inserted.[message_id], inserted.[topic], inserted.[aggregate_type], inserted.[aggregate_id], inserted.[partition_key], inserted.[payload], inserted.[headers], inserted.[trace_id], inserted.[attempts], inserted.[claimed_at], inserted.[created_at], inserted.[schema_version] INTO @claimed
    FROM [dbo].[outbox] AS o
    JOIN (
        SELECT TOP (%s) c.[id]
        FROM [dbo].[outbox] AS c WITH (READCOMMITTEDLOCK, READPAST, UPDLOCK, ROWLOCK)
        WHERE ((c.[status] = 0 AND c.[next_retry_at] IS NULL AND ABS(CAST(CHECKSUM(c.[aggregate_id]) AS BIGINT)) - ABS(CAST(CHECKSUM(c.[aggregate_id]) AS BIGINT)) / %s * %s = %s) OR ((c.[status] = 3 AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())) OR (c.[status] = 0 AND c.[next_retry_at] <= SYSUTCDATETIME()) OR (c.[status] = 1 AND c.[claimed_at] < DATEADD(MILLISECOND, %s, SYSUTCDATETIME()) AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())))) AND NOT EXISTS (SELECT 1 FROM [dbo].[outbox] e WITH (READCOMMITTEDLOCK) WHERE e.[aggregate_id] = c.[aggregate_id] AND e.[status] IN (0, 1, 3) AND e.[id] < c.[id])
        ORDER BY c.[id]
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

-- claim_chained_partitioned [50, 3, 3, 1, -60000, 500, 100, 500, 100, 500, -60000]
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
DECLARE @heads TABLE (
    [id] BIGINT NOT NULL PRIMARY KEY,
    [aggregate_id] NVARCHAR(255) NOT NULL
);
DECLARE @share INT;
BEGIN TRY
    BEGIN TRANSACTION;
    INSERT INTO @heads ([id], [aggregate_id])
        SELECT TOP (%s) c.[id], c.[aggregate_id]
        FROM [dbo].[outbox] AS c WITH (READCOMMITTEDLOCK, READPAST, UPDLOCK, ROWLOCK)
        WHERE ((c.[status] = 0 AND c.[next_retry_at] IS NULL AND ABS(CAST(CHECKSUM(c.[aggregate_id]) AS BIGINT)) - ABS(CAST(CHECKSUM(c.[aggregate_id]) AS BIGINT)) / %s * %s = %s) OR ((c.[status] = 3 AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())) OR (c.[status] = 0 AND c.[next_retry_at] <= SYSUTCDATETIME()) OR (c.[status] = 1 AND c.[claimed_at] < DATEADD(MILLISECOND, %s, SYSUTCDATETIME()) AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())))) AND NOT EXISTS (SELECT 1 FROM [dbo].[outbox] e WITH (READCOMMITTEDLOCK) WHERE e.[aggregate_id] = c.[aggregate_id] AND e.[status] IN (0, 1, 3) AND e.[id] < c.[id])
        ORDER BY c.[id]
        OPTION (MAXDOP 1);
    SELECT @share = CASE WHEN COUNT(*) = 0 THEN 0 WHEN (%s + COUNT(*) - 1) / COUNT(*) < %s THEN (%s + COUNT(*) - 1) / COUNT(*) - 1 ELSE %s - 1 END FROM @heads;
    UPDATE o SET o.[attempts] = o.[attempts] + CASE WHEN o.[status] = 1 THEN 1 ELSE 0 END, o.[status] = 1, o.[claimed_at] = SYSUTCDATETIME()
    OUTPUT inserted.[id], inserted.[message_id], inserted.[topic], inserted.[aggregate_type], inserted.[aggregate_id], inserted.[partition_key], inserted.[payload], inserted.[headers], inserted.[trace_id], inserted.[attempts], inserted.[claimed_at], inserted.[created_at], inserted.[schema_version] INTO @claimed
    FROM [dbo].[outbox] AS o
    JOIN (
        SELECT TOP (%s) x.[id] FROM (
            SELECT h.[id] FROM @heads AS h
            UNION ALL
            SELECT r.[id] FROM @heads AS h CROSS APPLY (
                SELECT TOP (@share) c.[id], MIN(CASE WHEN ((c.[status] = 0 AND c.[next_retry_at] IS NULL) OR ((c.[status] = 3 AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())) OR (c.[status] = 0 AND c.[next_retry_at] <= SYSUTCDATETIME()) OR (c.[status] = 1 AND c.[claimed_at] < DATEADD(MILLISECOND, %s, SYSUTCDATETIME()) AND (c.[next_retry_at] IS NULL OR c.[next_retry_at] <= SYSUTCDATETIME())))) THEN 1 ELSE 0 END) OVER (ORDER BY c.[id] ROWS UNBOUNDED PRECEDING) AS unbroken
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

