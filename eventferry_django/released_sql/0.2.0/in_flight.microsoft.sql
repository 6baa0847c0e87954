-- Release 0.2.0 on microsoft: the batches in flight beside the outbox.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
IF OBJECT_ID(N'{{schema_prefix}}[{{table}}_in_flight]', N'U') IS NULL
BEGIN
    CREATE TABLE {{schema_prefix}}[{{table}}_in_flight] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [relay] NVARCHAR(64) NOT NULL,
        [batch] INT NOT NULL,
        [claimed_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_{{table}}_in_flight_claimed_at] DEFAULT (SYSUTCDATETIME()),
        [event_count] INT NOT NULL,
        [taken] INT NOT NULL CONSTRAINT [DF_{{table}}_in_flight_taken] DEFAULT (0),
        [events] NVARCHAR(MAX) NOT NULL,
        CONSTRAINT [PK_{{table}}_in_flight] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_{{table}}_in_flight_batch] UNIQUE ([relay], [batch])
    );
END;
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}[{{table}}_in_flight];
