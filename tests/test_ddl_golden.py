"""The DDL of every vendor, pinned by golden files, and the T-SQL parsed by sqlglot.

These run without any database: they are how the SQL Server path is exercised on
machines with no SQL Server.
"""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from eventferry_django.naming import TableName
from eventferry_django.store import dialect_for
from eventferry_django.store.base import COLUMNS, INSERT_COLUMNS
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
