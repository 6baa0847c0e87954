-- Release 0.2.0 on mysql: rows a 0.1.0 relay left claimed handed back, and status 1 refused from then on.
-- Released DDL: never edit this file (see eventferry_django/released_ddl.py).
-- [forwards]
-- [statement]
UPDATE {{schema_prefix}}`{{table}}` SET `status` = 0, `claimed_at` = NULL, `next_retry_at` = NULL WHERE `status` = 1
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, 'ALTER TABLE {{schema_prefix}}`{{table}}` ADD CONSTRAINT `CK_{{table}}_claimed_needs_0_2` CHECK (`status` <> 1)', 'DO 0') FROM information_schema.table_constraints WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND constraint_name = 'CK_{{table}}_claimed_needs_0_2')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
-- [backwards]
-- [statement]
SET @eventferry_ddl = (SELECT IF(COUNT(*) > 0, IF(VERSION() LIKE '%MariaDB%', 'ALTER TABLE {{schema_prefix}}`{{table}}` DROP CONSTRAINT `CK_{{table}}_claimed_needs_0_2`', 'ALTER TABLE {{schema_prefix}}`{{table}}` DROP CHECK `CK_{{table}}_claimed_needs_0_2`'), 'DO 0') FROM information_schema.table_constraints WHERE table_schema = {{schema_literal}} AND table_name = '{{table}}' AND constraint_name = 'CK_{{table}}_claimed_needs_0_2')
-- [statement]
PREPARE eventferry_ddl FROM @eventferry_ddl
-- [statement]
EXECUTE eventferry_ddl
-- [statement]
DEALLOCATE PREPARE eventferry_ddl
