UPDATE [dbo].[outbox] SET [status] = 0, [claimed_at] = NULL, [next_retry_at] = NULL WHERE [status] = 1;
IF NOT EXISTS (SELECT 1 FROM sys.check_constraints WHERE name = N'CK_outbox_claimed_needs_0_2' AND parent_object_id = OBJECT_ID(N'[dbo].[outbox]', N'U'))
BEGIN
    ALTER TABLE [dbo].[outbox] ADD CONSTRAINT [CK_outbox_claimed_needs_0_2] CHECK ([status] <> 1);
END;
