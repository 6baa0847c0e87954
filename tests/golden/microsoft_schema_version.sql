IF NOT EXISTS (SELECT 1 FROM sys.columns WHERE name = N'schema_version' AND object_id = OBJECT_ID(N'[dbo].[outbox]', N'U'))
BEGIN
    ALTER TABLE [dbo].[outbox] ADD [schema_version] NVARCHAR(255) NULL;
END;
