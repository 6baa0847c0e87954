-- outbox on
IF CAST(SERVERPROPERTY('ProductMajorVersion') AS INT) >= 15
    OR CAST(SERVERPROPERTY('EngineEdition') AS INT) IN (5, 8)
    EXEC(N'ALTER INDEX [PK_outbox] ON [messaging].[outbox] SET (OPTIMIZE_FOR_SEQUENTIAL_KEY = ON)');

-- outbox off
IF CAST(SERVERPROPERTY('ProductMajorVersion') AS INT) >= 15
    OR CAST(SERVERPROPERTY('EngineEdition') AS INT) IN (5, 8)
    EXEC(N'ALTER INDEX [PK_outbox] ON [messaging].[outbox] SET (OPTIMIZE_FOR_SEQUENTIAL_KEY = OFF)');

-- inbox on
IF CAST(SERVERPROPERTY('ProductMajorVersion') AS INT) >= 15
    OR CAST(SERVERPROPERTY('EngineEdition') AS INT) IN (5, 8)
    EXEC(N'ALTER INDEX [PK_inbox] ON [messaging].[inbox] SET (OPTIMIZE_FOR_SEQUENTIAL_KEY = ON)');

-- inbox off
IF CAST(SERVERPROPERTY('ProductMajorVersion') AS INT) >= 15
    OR CAST(SERVERPROPERTY('EngineEdition') AS INT) IN (5, 8)
    EXEC(N'ALTER INDEX [PK_inbox] ON [messaging].[inbox] SET (OPTIMIZE_FOR_SEQUENTIAL_KEY = OFF)');

