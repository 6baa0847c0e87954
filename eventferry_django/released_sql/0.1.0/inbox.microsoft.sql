-- Release 0.1.0 on microsoft: the inbox table and its index.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
IF OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U') IS NULL
BEGIN
    CREATE TABLE {{schema_prefix}}[{{table}}] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [consumer] NVARCHAR(255) NOT NULL,
        [message_id] NVARCHAR(64) NOT NULL,
        [handled_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_{{table}}_handled_at] DEFAULT (SYSUTCDATETIME()),
        CONSTRAINT [PK_{{table}}] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_{{table}}_consumer_message_id] UNIQUE ([consumer], [message_id])
    );
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_handled_at' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_{{table}}_handled_at] ON {{schema_prefix}}[{{table}}] ([handled_at]);
END;
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}[{{table}}];
