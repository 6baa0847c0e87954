DROP TABLE IF EXISTS [dbo].[outbox_relays];
