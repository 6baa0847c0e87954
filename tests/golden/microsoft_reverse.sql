DROP TABLE IF EXISTS [dbo].[outbox];
