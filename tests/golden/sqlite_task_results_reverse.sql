DROP TABLE IF EXISTS "outbox_task_results";
