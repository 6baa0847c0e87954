-- Release 0.1.0 on microsoft: the relay registry beside the outbox.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
IF OBJECT_ID(N'{{schema_prefix}}[{{table}}_relays]', N'U') IS NULL
BEGIN
    CREATE TABLE {{schema_prefix}}[{{table}}_relays] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [instance] NVARCHAR(64) NOT NULL,
        [relay_id] NVARCHAR(255) NOT NULL,
        [seen_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_{{table}}_relays_seen_at] DEFAULT (SYSUTCDATETIME()),
        CONSTRAINT [PK_{{table}}_relays] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_{{table}}_relays_instance] UNIQUE ([instance])
    );
END;
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}[{{table}}_relays];
