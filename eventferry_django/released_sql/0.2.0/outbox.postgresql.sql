-- Release 0.2.0 on postgresql: rows a 0.1.0 relay left claimed handed back, and status 1 refused from then on.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'CK_{{table}}_claimed_needs_0_2'
                   AND conrelid = '{{schema_prefix}}"{{table}}"'::regclass) THEN
        ALTER TABLE {{schema_prefix}}"{{table}}" ADD CONSTRAINT "CK_{{table}}_claimed_needs_0_2" CHECK ("status" <> 1) NOT VALID;
    END IF;
END
$$
-- [statement]
UPDATE {{schema_prefix}}"{{table}}" SET "status" = 0, "claimed_at" = NULL, "next_retry_at" = NULL WHERE "status" = 1
-- [backwards]
-- [statement]
ALTER TABLE {{schema_prefix}}"{{table}}" DROP CONSTRAINT IF EXISTS "CK_{{table}}_claimed_needs_0_2"
