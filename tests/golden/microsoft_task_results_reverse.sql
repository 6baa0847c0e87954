DROP TABLE IF EXISTS [dbo].[outbox_task_results];
