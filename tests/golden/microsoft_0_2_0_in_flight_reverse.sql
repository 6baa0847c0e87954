DROP TABLE IF EXISTS [dbo].[outbox_in_flight];
