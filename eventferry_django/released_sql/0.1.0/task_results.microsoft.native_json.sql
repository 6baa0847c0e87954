-- Release 0.1.0 on microsoft with NATIVE_JSON: the Django tasks' results table beside the outbox.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
IF OBJECT_ID(N'{{schema_prefix}}[{{table}}_task_results]', N'U') IS NULL
BEGIN
    CREATE TABLE {{schema_prefix}}[{{table}}_task_results] (
        [id] BIGINT IDENTITY(1,1) NOT NULL,
        [result_id] NVARCHAR(64) NOT NULL,
        [task_path] NVARCHAR(255) NOT NULL,
        [backend] NVARCHAR(255) NOT NULL,
        [queue_name] NVARCHAR(255) NOT NULL,
        [priority] INT NOT NULL CONSTRAINT [DF_{{table}}_task_results_priority] DEFAULT (0),
        [status] NVARCHAR(64) NOT NULL,
        [arguments] JSON NOT NULL,
        [run_after] DATETIME2(3) NULL,
        [enqueued_at] DATETIME2(3) NOT NULL CONSTRAINT [DF_{{table}}_task_results_enqueued_at] DEFAULT (SYSUTCDATETIME()),
        [started_at] DATETIME2(3) NULL,
        [last_attempted_at] DATETIME2(3) NULL,
        [finished_at] DATETIME2(3) NULL,
        [attempts] INT NOT NULL CONSTRAINT [DF_{{table}}_task_results_attempts] DEFAULT (0),
        [worker_ids] JSON NULL,
        [return_value] JSON NULL,
        [errors] JSON NULL,
        CONSTRAINT [PK_{{table}}_task_results] PRIMARY KEY CLUSTERED ([id]),
        CONSTRAINT [UQ_{{table}}_task_results_result_id] UNIQUE ([result_id])
    );
END;
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'IX_{{table}}_task_results_status_finished_at' AND object_id = OBJECT_ID(N'{{schema_prefix}}[{{table}}_task_results]', N'U'))
BEGIN
    CREATE NONCLUSTERED INDEX [IX_{{table}}_task_results_status_finished_at] ON {{schema_prefix}}[{{table}}_task_results] ([status], [finished_at]);
END;
-- [backwards]
-- [statement]
DROP TABLE IF EXISTS {{schema_prefix}}[{{table}}_task_results];
