-- record ['shipping', 'm-1', 'shipping', 'm-1']
INSERT INTO [messaging].[inbox] ([consumer], [message_id])
    SELECT %s, %s
    WHERE NOT EXISTS (SELECT 1 FROM [messaging].[inbox] WITH (UPDLOCK, HOLDLOCK)
        WHERE [consumer] = %s AND [message_id] = %s);

-- purge [500, '2026-10-22 00:00:00']
DELETE TOP (%s) FROM [messaging].[inbox] WITH (READCOMMITTEDLOCK, READPAST, ROWLOCK) WHERE [handled_at] < CAST(%s AS DATETIME2(3));

-- purge_consumer [500, '2026-10-22 00:00:00', 'shipping']
DELETE TOP (%s) FROM [messaging].[inbox] WITH (READCOMMITTEDLOCK, READPAST, ROWLOCK) WHERE [handled_at] < CAST(%s AS DATETIME2(3)) AND [consumer] = %s;

