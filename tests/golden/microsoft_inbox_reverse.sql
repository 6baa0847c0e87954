DROP TABLE IF EXISTS [dbo].[inbox];
