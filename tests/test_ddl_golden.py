"""The DDL of every vendor, pinned by golden files, and the T-SQL parsed by sqlglot.

These run without any database: they are how the SQL Server path is exercised on
machines with no SQL Server.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from eventferry_django.naming import TableName
from eventferry_django.store import dialect_for
from eventferry_django.store.base import COLUMNS, INBOX_COLUMNS, INSERT_COLUMNS, Table
from eventferry_django.store.microsoft import MicrosoftDialect

from .golden import assert_golden

MICROSOFT_CASES = {
    "microsoft_default": dict(name=TableName("outbox")),
    "microsoft_schema_messaging": dict(name=TableName("events", "messaging")),
    "microsoft_native_json": dict(name=TableName("outbox", "messaging"), native_json=True),
}


def render(statements: list[str]) -> str:
    return "\n".join(s if s.endswith(";") else s + ";" for s in statements) + "\n"


@pytest.mark.parametrize("case", sorted(MICROSOFT_CASES))
def test_tsql_create_matches_golden(case: str) -> None:
    dialect = MicrosoftDialect(**MICROSOFT_CASES[case])
    assert_golden(f"{case}.sql", render(dialect.create_statements()))


@pytest.mark.parametrize("vendor", ["postgresql", "mysql", "sqlite"])
def test_other_vendors_create_matches_golden(vendor: str) -> None:
    assert_golden(f"{vendor}_default.sql", render(dialect_for(vendor, TableName("outbox"))
                                                  .create_statements()))


@pytest.mark.parametrize("vendor", ["microsoft", "postgresql", "mysql", "sqlite"])
def test_reverse_and_insert_match_golden(vendor: str) -> None:
    dialect = dialect_for(vendor, TableName("outbox"))
    assert_golden(f"{vendor}_reverse.sql", render(dialect.drop_statements()))
    assert_golden(f"{vendor}_insert_2_rows.sql", render([dialect.insert_sql(2)]))


def test_tsql_is_one_batch_without_go() -> None:
    statements = MicrosoftDialect(TableName("outbox")).create_statements()
    assert len(statements) == 1
    assert "\nGO" not in statements[0]


def _parse_one(sql: str) -> exp.Expression:
    parsed = sqlglot.parse(sql, read="tsql")
    assert len(parsed) == 1 and parsed[0] is not None
    tree = parsed[0]
    # sqlglot falls back to an opaque Command for text it cannot parse: that is a failure.
    commands = [n.sql() for n in tree.walk() if isinstance(n, exp.Command)]
    assert not commands, f"sqlglot could not parse: {commands}"
    return tree


@pytest.mark.parametrize("case", sorted(MICROSOFT_CASES))
def test_every_tsql_statement_parses(case: str) -> None:
    dialect = MicrosoftDialect(**MICROSOFT_CASES[case])
    name = dialect.name
    blocks = dialect.guarded_blocks()
    assert len(blocks) == 4

    for guard, statement in blocks:
        _parse_one(f"SELECT CASE WHEN {guard} THEN 1 ELSE 0 END")
        block = _parse_one(f"IF {guard}\nBEGIN\n    {statement};\nEND;")
        assert isinstance(block, exp.IfBlock)

    table = _parse_one(blocks[0][1])
    assert isinstance(table, exp.Create) and table.kind == "TABLE"
    target = table.this.this
    assert (target.db, target.name) == (name.schema, name.table)
    columns = [c.name for c in table.find_all(exp.ColumnDef)]
    assert columns == [c.name for c in COLUMNS]
    checks = " ".join(c.sql("tsql") for c in table.find_all(exp.CheckColumnConstraint))
    assert ("ISJSON" in checks) is not dialect.native_json

    index_names = []
    for _, statement in blocks[1:]:
        index = _parse_one(statement)
        assert isinstance(index, exp.Create) and index.kind == "NONCLUSTERED INDEX"
        on_table = index.find(exp.Table)
        assert on_table is not None and (on_table.db, on_table.name) == (name.schema, name.table)
        index_names.append(index.this.name)
    assert index_names == list(name.indexes)
    claim_sql = _parse_one(blocks[2][1]).sql("tsql")
    assert "WHERE [status] IN (0, 1, 3)" in claim_sql
    assert "INCLUDE ([aggregate_id], [claimed_at])" in claim_sql

    drop = _parse_one(dialect.drop_statements()[0])
    assert isinstance(drop, exp.Drop) and drop.args.get("exists")


def test_tsql_insert_parses_with_parameters() -> None:
    sql = MicrosoftDialect(TableName("outbox")).insert_sql(3)
    # Django's %s placeholders become pyodbc's ? on the wire.
    insert = _parse_one(sql.replace("%s", "?"))
    assert isinstance(insert, exp.Insert)
    assert [c.name for c in insert.this.expressions] == list(INSERT_COLUMNS)
    assert len(insert.expression.expressions) == 3


def test_every_name_is_schema_qualified_in_tsql() -> None:
    sql = MicrosoftDialect(TableName("outbox", "messaging")).create_statements()[0]
    assert "[dbo]" not in sql
    # Every reference to the table carries the schema.
    assert sql.count("[outbox]") == sql.count("[messaging].[outbox]")


class RecordingCursor:
    """Collects the SQL a dialect would send, with no database behind it: the T-SQL
    cannot run here, so its text is what these tests pin down and parse."""

    rowcount = 0

    def __init__(self) -> None:
        self.statements: list[tuple[str, list[object]]] = []

    def execute(self, sql: str, params: list[object] | None = None) -> None:
        self.statements.append((sql, list(params or [])))

    def fetchall(self) -> list[tuple[object, ...]]:
        return []


def tsql_operations(dialect: MicrosoftDialect) -> dict[str, tuple[str, list[object]]]:
    """Every DML statement of the SQL Server store, rendered with sample arguments."""
    lease = "2026-11-21 12:00:00.123"
    calls = {
        "claim": lambda c: dialect.claim(c, 500, 60_000),
        "ack": lambda c: dialect.ack(c, [1, 2, 3], lease),
        "fail": lambda c: dialect.fail(c, [(4, 1500, "nack")], lease),
        "bury": lambda c: dialect.bury(c, [(5, "poison", True)], lease),
        "release": lambda c: dialect.release(c, [6, 7], lease),
        "purge": lambda c: dialect.purge_batch(c, [2, 4], "2026-11-14 00:00:00", 1000),
        "insert": lambda c: c.execute(dialect.insert_sql(2), []),
    }
    return recorded(calls)


def recorded(calls: dict[str, Any]) -> dict[str, tuple[str, list[object]]]:
    """The one statement each call sends, by name."""
    rendered = {}
    for name, call in calls.items():
        cursor = RecordingCursor()
        call(cursor)
        [rendered[name]] = cursor.statements
    return rendered


def golden_text(operations: dict[str, tuple[str, list[object]]]) -> str:
    return "".join(
        f"-- {name} {params!r}\n{sql if sql.endswith(';') else sql + ';'}\n\n"
        for name, (sql, params) in operations.items()
    )


def as_tsql_parameters(sql: str) -> str:
    """pyodbc sends ? markers; sqlglot reads T-SQL variables, so number them @p1, @p2..."""
    parts = sql.split("%s")
    return "".join(f"{part}@p{i}" for i, part in enumerate(parts[:-1], 1)) + parts[-1]


def test_tsql_dml_matches_golden() -> None:
    dialect = MicrosoftDialect(TableName("outbox", "messaging"))
    assert_golden("microsoft_dml.sql", golden_text(tsql_operations(dialect)))


@pytest.mark.parametrize("operation", ["ack", "fail", "bury", "release", "purge", "insert"])
def test_every_tsql_dml_statement_parses(operation: str) -> None:
    dialect = MicrosoftDialect(TableName("outbox", "messaging"))
    sql, params = tsql_operations(dialect)[operation]
    tree = _parse_one(as_tsql_parameters(sql))
    tables = {(t.db, t.name) for t in tree.find_all(exp.Table) if t.name != "OPENJSON"}
    assert ("messaging", "outbox") in tables
    assert sql.count("%s") == len(params) or operation == "insert"


def test_tsql_claim_batch_parts_parse_and_hold_the_contract() -> None:
    dialect = MicrosoftDialect(TableName("outbox", "messaging"))
    batch = dialect.claim_sql()
    declare, update, result = (dialect.claim_declare_sql(), dialect.claim_update_sql(),
                               dialect.claim_result_sql())
    for part in (declare, update, result):
        assert part in batch
        _parse_one(as_tsql_parameters(part))
    # The frame sqlglot cannot parse (TRY/CATCH) is pinned by the golden file instead.
    for line in ("SET NOCOUNT ON;", "SET XACT_ABORT ON;", "BEGIN TRY", "BEGIN TRANSACTION;",
                 "COMMIT TRANSACTION;", "BEGIN CATCH", "IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;",
                 "THROW;", "END CATCH;"):
        assert line in batch
    tree = _parse_one(as_tsql_parameters(update))
    assert isinstance(tree, exp.Update)
    assert "INTO @claimed" in tree.sql("tsql")
    assert "WITH" not in update.split("UPDATE", 1)[0]  # a derived table, not a CTE
    outer_hints = "WITH (READCOMMITTEDLOCK, READPAST, UPDLOCK, ROWLOCK)"
    probe = update.split("NOT EXISTS", 1)[1]
    assert outer_hints in update and "READPAST" not in probe
    assert "WITH (READCOMMITTEDLOCK)" in probe
    assert update.rstrip().endswith("OPTION (MAXDOP 1)")
    assert "SYSUTCDATETIME()" in update and "GETDATE" not in batch
    assert "ISOLATION LEVEL" not in batch


def test_tsql_ack_is_one_statement_with_one_parameter_for_all_ids() -> None:
    dialect = MicrosoftDialect(TableName("outbox"))
    cursor = RecordingCursor()
    dialect.ack(cursor, list(range(1, 5001)), "lease")
    [(sql, params)] = cursor.statements
    assert "OPENJSON(%s) WITH ([id] BIGINT '$')" in sql
    assert len(params) == 2  # the JSON array of 5,000 ids and the lease


# -- the inbox: the same machinery, another table ------------------------------------------

INBOX = TableName("inbox", role="Inbox")


def inbox_of(vendor: str, name: TableName = INBOX) -> tuple[Any, Table]:
    dialect = dialect_for(vendor, TableName("outbox"))
    return dialect, dialect.inbox(name)


@pytest.mark.parametrize("vendor", ["microsoft", "postgresql", "mysql", "sqlite"])
def test_inbox_create_and_reverse_match_golden(vendor: str) -> None:
    dialect, table = inbox_of(vendor)
    assert_golden(f"{vendor}_inbox_default.sql", render(dialect.create_statements(table)))
    assert_golden(f"{vendor}_inbox_reverse.sql", render(dialect.drop_statements(table)))


def test_tsql_inbox_in_a_schema_matches_golden() -> None:
    dialect, table = inbox_of("microsoft", TableName("handled", "messaging", role="Inbox"))
    assert_golden("microsoft_inbox_schema_messaging.sql", render(dialect.create_statements(table)))


@pytest.mark.parametrize("schema", [None, "messaging"])
def test_every_tsql_inbox_statement_parses(schema: str | None) -> None:
    dialect, table = inbox_of("microsoft", TableName("inbox", schema, role="Inbox"))
    name = table.name
    blocks = dialect.guarded_blocks(table)
    assert len(blocks) == 2
    for guard, statement in blocks:
        _parse_one(f"SELECT CASE WHEN {guard} THEN 1 ELSE 0 END")
        assert isinstance(_parse_one(f"IF {guard}\nBEGIN\n    {statement};\nEND;"), exp.IfBlock)

    create = _parse_one(blocks[0][1])
    assert isinstance(create, exp.Create) and create.kind == "TABLE"
    assert (create.this.this.db, create.this.this.name) == (name.schema, name.table)
    assert [c.name for c in create.find_all(exp.ColumnDef)] == [c.name for c in INBOX_COLUMNS]
    sql = create.sql("tsql")
    assert "CONSTRAINT [PK_inbox] PRIMARY KEY CLUSTERED ([id])" in sql
    assert "CONSTRAINT [UQ_inbox_consumer_message_id] UNIQUE ([consumer], [message_id])" in sql
    assert "CONSTRAINT [DF_inbox_handled_at] DEFAULT (SYSUTCDATETIME())" in sql

    index = _parse_one(blocks[1][1])
    assert isinstance(index, exp.Create) and index.kind == "NONCLUSTERED INDEX"
    assert index.this.name == "IX_inbox_handled_at"
    drop = _parse_one(dialect.drop_statements(table)[0])
    assert isinstance(drop, exp.Drop) and drop.args.get("exists")
    dropped = drop.find(exp.Table)
    assert dropped is not None and (dropped.db, dropped.name) == (name.schema, name.table)


def tsql_inbox_operations() -> dict[str, tuple[str, list[object]]]:
    dialect, table = inbox_of("microsoft", TableName("inbox", "messaging", role="Inbox"))
    calls = {
        "record": lambda c: dialect.record_message(c, table, "shipping", "m-1"),
        "purge": lambda c: dialect.inbox_purge_batch(c, table, "2026-10-22 00:00:00", None, 500),
        "purge_consumer": lambda c: dialect.inbox_purge_batch(
            c, table, "2026-10-22 00:00:00", "shipping", 500),
    }
    return recorded(calls)


def test_tsql_inbox_dml_matches_golden() -> None:
    assert_golden("microsoft_inbox_dml.sql", golden_text(tsql_inbox_operations()))


@pytest.mark.parametrize("operation", ["record", "purge", "purge_consumer"])
def test_every_tsql_inbox_dml_statement_parses(operation: str) -> None:
    sql, params = tsql_inbox_operations()[operation]
    tree = _parse_one(as_tsql_parameters(sql))
    # sqlglot reads DELETE TOP (n) as a table named TOP; the golden file pins the text.
    tables = {(t.db, t.name) for t in tree.find_all(exp.Table) if t.name != "TOP"}
    assert tables == {("messaging", "inbox")}
    assert sql.count("%s") == len(params)


def test_tsql_inbox_record_probes_with_a_key_range_lock() -> None:
    sql, params = tsql_inbox_operations()["record"]
    tree = _parse_one(as_tsql_parameters(sql))
    assert isinstance(tree, exp.Insert)
    # The probe holds an update lock on the key range until commit, so a concurrent
    # delivery of the same message waits instead of also finding it absent.
    probe = sql.split("NOT EXISTS", 1)[1]
    assert "WITH (UPDLOCK, HOLDLOCK)" in probe
    assert params == ["shipping", "m-1", "shipping", "m-1"]
    purge, _ = tsql_inbox_operations()["purge"]
    assert "WITH (ROWLOCK, READPAST)" in purge and "CAST(@p2 AS DATETIME2(3))" in (
        as_tsql_parameters(purge))
