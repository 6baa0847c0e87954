DROP TABLE IF EXISTS [dbo].[outbox_buckets];
