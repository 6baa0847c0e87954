IF EXISTS (SELECT 1 FROM sys.columns WHERE name = N'schema_version' AND object_id = OBJECT_ID(N'[dbo].[outbox]', N'U'))
BEGIN
    ALTER TABLE [dbo].[outbox] DROP COLUMN [schema_version];
END;
