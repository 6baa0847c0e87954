-- Release 0.2.0 on sqlite: rows a 0.1.0 relay left claimed handed back, and status 1 refused from then on.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
CREATE TRIGGER IF NOT EXISTS "CK_{{table}}_claimed_needs_0_2_insert"
BEFORE INSERT ON {{schema_prefix}}"{{table}}" FOR EACH ROW WHEN NOT (NEW."status" <> 1)
BEGIN
    SELECT RAISE(ABORT, 'CK_{{table}}_claimed_needs_0_2: a relay of eventferry-django 0.1.0 is claiming rows (status 1), which 0.2.0 refuses: upgrade it to 0.2.0');
END
-- [statement]
CREATE TRIGGER IF NOT EXISTS "CK_{{table}}_claimed_needs_0_2_update"
BEFORE UPDATE OF "status" ON {{schema_prefix}}"{{table}}" FOR EACH ROW WHEN NOT (NEW."status" <> 1)
BEGIN
    SELECT RAISE(ABORT, 'CK_{{table}}_claimed_needs_0_2: a relay of eventferry-django 0.1.0 is claiming rows (status 1), which 0.2.0 refuses: upgrade it to 0.2.0');
END
-- [statement]
UPDATE {{schema_prefix}}"{{table}}" SET "status" = 0, "claimed_at" = NULL, "next_retry_at" = NULL WHERE "status" = 1
-- [backwards]
-- [statement]
DROP TRIGGER IF EXISTS "CK_{{table}}_claimed_needs_0_2_insert"
-- [statement]
DROP TRIGGER IF EXISTS "CK_{{table}}_claimed_needs_0_2_update"
