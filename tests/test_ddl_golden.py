"""The DDL of every vendor, pinned by golden files, and the T-SQL parsed by sqlglot.

These run without any database: they are how the SQL Server path is exercised on
machines with no SQL Server.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
import sqlglot
from sqlglot import exp

from eventferry_django.ddl import TableKind, released
from eventferry_django.naming import TableName
from eventferry_django.store import dialect_for
from eventferry_django.store.bucket_leases import BucketLeaseSql
from eventferry_django.store.in_flight_journal import InFlightSql
from eventferry_django.store.microsoft import MicrosoftDialect, MicrosoftPurge
from eventferry_django.store.tables import COLUMNS, INBOX_COLUMNS, INSERT_COLUMNS, Table

from .golden import assert_golden
from .tsql import as_tsql_parameters, parse_tsql

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
    assert_golden(f"{case}.sql", render(dialect.schema.create_statements()))


@pytest.mark.parametrize("vendor", ["postgresql", "mysql", "sqlite"])
def test_other_vendors_create_matches_golden(vendor: str) -> None:
    assert_golden(f"{vendor}_default.sql", render(dialect_for(vendor, TableName("outbox"))
                                                  .schema.create_statements()))


@pytest.mark.parametrize("vendor", ["microsoft", "postgresql", "mysql", "sqlite"])
def test_reverse_and_insert_match_golden(vendor: str) -> None:
    dialect = dialect_for(vendor, TableName("outbox"))
    assert_golden(f"{vendor}_reverse.sql", render(dialect.schema.drop_statements()))
    assert_golden(f"{vendor}_insert_2_rows.sql", render([dialect.inserts.insert_sql(2)]))


@pytest.mark.parametrize("vendor", ["microsoft", "postgresql", "mysql", "sqlite"])
def test_scheduled_insert_matches_golden(vendor: str) -> None:
    dialect = dialect_for(vendor, TableName("outbox"))
    assert_golden(f"{vendor}_insert_2_rows_scheduled.sql",
                  render([dialect.inserts.insert_sql(2, scheduled=True)]))


def test_tsql_scheduled_insert_parses_with_parameters() -> None:
    dialect = MicrosoftDialect(TableName("outbox"))
    insert = parse_tsql(dialect.inserts.insert_sql(3, scheduled=True).replace("%s", "?"))
    assert isinstance(insert, exp.Insert)
    assert [c.name for c in insert.this.expressions] == [*INSERT_COLUMNS, "next_retry_at"]
    rows = insert.expression.expressions
    assert len(rows) == 3
    # Each row binds its own values, then the delivery time's.
    per_row = len(INSERT_COLUMNS) + len(dialect.inserts.delivery_params(None, None))
    assert all(len(list(row.find_all(exp.Placeholder))) == per_row for row in rows)


@pytest.mark.parametrize("vendor", ["microsoft", "postgresql", "mysql", "sqlite"])
def test_claimable_probes_match_golden(vendor: str) -> None:
    probes = dialect_for(vendor, TableName("outbox")).claimable.probes()
    assert_golden(f"{vendor}_claimable_probes.sql",
                  "".join(f"-- {kind}\n{sql};\n" for kind, (sql, _) in probes.items()))


def test_tsql_claimable_probes_parse_and_read_one_row_each() -> None:
    for kind, (sql, _) in MicrosoftDialect(TableName("outbox")).claimable.probes().items():
        select = parse_tsql(sql.replace("%s", "?"))
        assert isinstance(select, exp.Select), kind
        assert sql.startswith("SELECT TOP (1) "), kind


def test_tsql_is_one_batch_without_go() -> None:
    statements = MicrosoftDialect(TableName("outbox")).schema.create_statements()
    assert len(statements) == 1
    assert "\nGO" not in statements[0]


@pytest.mark.parametrize("case", sorted(MICROSOFT_CASES))
def test_every_tsql_statement_parses(case: str) -> None:
    dialect = MicrosoftDialect(**MICROSOFT_CASES[case])
    name = dialect.name
    blocks = dialect.schema.guarded_blocks()
    assert len(blocks) == 5  # the table and its four indexes

    for guard, statement in blocks:
        parse_tsql(f"SELECT CASE WHEN {guard} THEN 1 ELSE 0 END")
        block = parse_tsql(f"IF {guard}\nBEGIN\n    {statement};\nEND;")
        assert isinstance(block, exp.IfBlock)

    table = parse_tsql(blocks[0][1])
    assert isinstance(table, exp.Create) and table.kind == "TABLE"
    target = table.this.this
    assert (target.db, target.name) == (name.schema, name.table)
    columns = [c.name for c in table.find_all(exp.ColumnDef)]
    assert columns == [c.name for c in COLUMNS]
    checks = " ".join(c.sql("tsql") for c in table.find_all(exp.CheckColumnConstraint))
    assert ("ISJSON" in checks) is not dialect.native_json

    index_names = []
    for _, statement in blocks[1:]:
        index = parse_tsql(statement)
        assert isinstance(index, exp.Create) and index.kind == "NONCLUSTERED INDEX"
        on_table = index.find(exp.Table)
        assert on_table is not None and (on_table.db, on_table.name) == (name.schema, name.table)
        index_names.append(index.this.name)
    assert index_names == [name.aggregate_index, name.claim_index, name.closed_index,
                           name.bucket_index]
    claim_sql = parse_tsql(blocks[2][1]).sql("tsql")
    assert "WHERE [status] IN (0, 1, 3)" in claim_sql
    assert "INCLUDE ([aggregate_id], [claimed_at])" in claim_sql
    # Literal IN lists and ANDs: filtered index predicates allow no OR, no parameters.
    assert blocks[3][1].endswith("([status], [processed_at]) WHERE [status] IN (2, 4)")
    assert blocks[4][1].endswith("([bucket], [id]) INCLUDE ([aggregate_id]) "
                                 "WHERE [status] = 0 AND [next_retry_at] IS NULL")

    drop = parse_tsql(dialect.schema.drop_statements()[0])
    assert isinstance(drop, exp.Drop) and drop.args.get("exists")


def test_tsql_insert_parses_with_parameters() -> None:
    sql = MicrosoftDialect(TableName("outbox")).inserts.insert_sql(3)
    # Django's %s placeholders become pyodbc's ? on the wire.
    insert = parse_tsql(sql.replace("%s", "?"))
    assert isinstance(insert, exp.Insert)
    assert [c.name for c in insert.this.expressions] == list(INSERT_COLUMNS)
    assert len(insert.expression.expressions) == 3


def test_every_name_is_schema_qualified_in_tsql() -> None:
    sql = MicrosoftDialect(TableName("outbox", "messaging")).schema.create_statements()[0]
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


def settlement_calls(dialect: Any) -> dict[str, Any]:
    """The statements after a claim, with sample arguments: every vendor's golden file
    renders these the same way."""
    leases = BucketLeaseSql(dialect.ops)
    journal = InFlightSql(dialect.ops)
    return {
        "ack": lambda c: dialect.settlement.ack(c, [1, 2, 3]),
        "fail": lambda c: dialect.settlement.fail(
            c, [(4, 0, 1500, "nack"), (10, 2, 3000, "unroutable")]),
        "bury": lambda c: dialect.settlement.bury(
            c, [(5, 4, "poison", True), (11, 0, "too large", False)]),
        "purge": lambda c: dialect.purge.purge_batch(c, [2, 4], "2026-11-14 00:00:00", 1000),
        "insert": lambda c: c.execute(dialect.inserts.insert_sql(2), []),
        "unbucketed": lambda c: c.execute(*dialect.bucket_fill.unbucketed_sql()),
        "fill_bucket": lambda c: c.execute(*dialect.bucket_fill.fill_sql([("agg-7", 214),
                                                                          ("agg-9", 3)])),
        # The bucket leases (store/bucket_leases.py).
        "seed_buckets": lambda c: c.execute(*leases.seed()),
        "take_buckets": lambda c: c.execute(*leases.take("relay-a", [3, 7], 60_000)),
        "renew_buckets": lambda c: c.execute(*leases.renew("relay-a", 60_000)),
        "release_buckets": lambda c: c.execute(*leases.release("relay-a", [7])),
        "release_all_buckets": lambda c: c.execute(*leases.release("relay-a")),
        "held_buckets": lambda c: c.execute(*leases.held("relay-a")),
        "bucket_holders": lambda c: c.execute(*leases.holders()),
        # The batches in flight (store/in_flight_journal.py).
        "record_batch": lambda c: c.execute(*journal.record("relay-a", 7, [1, 2, 5])),
        "forget_whole_batch": lambda c: c.execute(*journal.forget_whole("relay-a", 7)),
        "lock_batch": lambda c: c.execute(*journal.lock("relay-a", 7)),
        "batch_events": lambda c: c.execute(*journal.events_of("relay-a", 7)),
        "forget_batch": lambda c: c.execute(*journal.forget("relay-a", 7)),
        "batches_in_flight": lambda c: c.execute(*journal.entries()),
        "relay_batches_in_flight": lambda c: c.execute(*journal.entries("relay-a")),
        "batch_rows_in_buckets": lambda c: c.execute(*journal.in_buckets([1, 2, 3], [7, 9])),
        "shrink_batch": lambda c: c.execute(*journal.shrink("relay-a", 7, [3], 2)),
        "shrink_batch_to_nothing": lambda c: c.execute(*journal.shrink("relay-a", 7, [], 3)),
        "count_attempt": lambda c: c.execute(*journal.count_attempt([1, 2])),
        "forget_emptied_batches": lambda c: c.execute(
            *journal.forget_emptied(dt.timedelta(days=1))),
    }


def tsql_operations(dialect: MicrosoftDialect) -> dict[str, tuple[str, list[object]]]:
    """Every DML statement of the SQL Server store but the claim (committed apart:
    tests/test_claim_sql.py), rendered with sample arguments."""
    return recorded({
        **settlement_calls(dialect),
        "stored_message_ids": lambda c: dialect.inserts.stored_message_ids(c, ["m-1", "m-2"]),
    })


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


def test_tsql_dml_matches_golden() -> None:
    dialect = MicrosoftDialect(TableName("outbox", "messaging"))
    assert_golden("microsoft_dml.sql", golden_text(tsql_operations(dialect)))


@pytest.mark.parametrize("operation", ["ack", "fail", "bury", "purge",
                                       "insert", "unbucketed", "fill_bucket",
                                       "stored_message_ids"])
def test_every_tsql_dml_statement_parses(operation: str) -> None:
    dialect = MicrosoftDialect(TableName("outbox", "messaging"))
    sql, params = tsql_operations(dialect)[operation]
    tree = parse_tsql(as_tsql_parameters(sql))
    tables = {(t.db, t.name) for t in tree.find_all(exp.Table) if t.name != "OPENJSON"}
    assert ("messaging", "outbox") in tables
    assert sql.count("%s") == len(params) or operation == "insert"


@pytest.mark.parametrize(("vendor", "retention", "buckets"), [
    ("microsoft", "IX_outbox_closed_rows", True), ("postgresql", "IX_outbox_closed_rows", True),
    ("mysql", "IX_outbox_done_processed_at", True), ("sqlite", "IX_outbox_done_processed_at", False),
])
def test_the_outbox_indexes_are_the_claims_the_retention_and_the_buckets(
        vendor: str, retention: str, buckets: bool) -> None:
    """The retention index is filtered on the closed statuses where the vendor plans
    with filtered indexes (not MariaDB/MySQL, which have none, nor SQLite, which would not
    use one for ``status = 2``); SQLite's relays take turns, so it has no bucket index."""
    dialect = dialect_for(vendor, TableName("outbox"))
    names = [index.name for index in dialect.schema.outbox.indexes]
    assert names == ["IX_outbox_agg_open", "IX_outbox_claim_ready", retention,
                     *(["IX_outbox_bucket_fresh"] if buckets else [])]
    assert dialect.schema.retention_index.name == retention


def test_tsql_ack_is_one_statement_with_one_parameter_for_all_ids() -> None:
    dialect = MicrosoftDialect(TableName("outbox"))
    cursor = RecordingCursor()
    dialect.settlement.ack(cursor, list(range(1, 5001)))
    [(sql, params)] = cursor.statements
    assert "OPENJSON(%s) WITH ([id] BIGINT '$')" in sql
    assert len(params) == 1  # the JSON array of 5,000 ids


# -- the inbox: the same machinery, another table ------------------------------------------

INBOX = TableName("inbox", role="Inbox")


def inbox_of(vendor: str, name: TableName = INBOX) -> tuple[Any, Table]:
    dialect = dialect_for(vendor, TableName("outbox"))
    return dialect, dialect.schema.inbox(name)


@pytest.mark.parametrize("vendor", ["microsoft", "postgresql", "mysql", "sqlite"])
def test_inbox_create_and_reverse_match_golden(vendor: str) -> None:
    dialect, table = inbox_of(vendor)
    assert_golden(f"{vendor}_inbox_default.sql", render(dialect.schema.create_statements(table)))
    assert_golden(f"{vendor}_inbox_reverse.sql", render(dialect.schema.drop_statements(table)))


def test_tsql_inbox_in_a_schema_matches_golden() -> None:
    dialect, table = inbox_of("microsoft", TableName("handled", "messaging", role="Inbox"))
    assert_golden("microsoft_inbox_schema_messaging.sql", render(dialect.schema.create_statements(table)))


@pytest.mark.parametrize("schema", [None, "messaging"])
def test_every_tsql_inbox_statement_parses(schema: str | None) -> None:
    dialect, table = inbox_of("microsoft", TableName("inbox", schema, role="Inbox"))
    name = table.name
    blocks = dialect.schema.guarded_blocks(table)
    assert len(blocks) == 2
    for guard, statement in blocks:
        parse_tsql(f"SELECT CASE WHEN {guard} THEN 1 ELSE 0 END")
        assert isinstance(parse_tsql(f"IF {guard}\nBEGIN\n    {statement};\nEND;"), exp.IfBlock)

    create = parse_tsql(blocks[0][1])
    assert isinstance(create, exp.Create) and create.kind == "TABLE"
    assert (create.this.this.db, create.this.this.name) == (name.schema, name.table)
    assert [c.name for c in create.find_all(exp.ColumnDef)] == [c.name for c in INBOX_COLUMNS]
    sql = create.sql("tsql")
    assert "CONSTRAINT [PK_inbox] PRIMARY KEY CLUSTERED ([id])" in sql
    assert "CONSTRAINT [UQ_inbox_consumer_message_id] UNIQUE ([consumer], [message_id])" in sql
    assert "CONSTRAINT [DF_inbox_handled_at] DEFAULT (SYSUTCDATETIME())" in sql

    index = parse_tsql(blocks[1][1])
    assert isinstance(index, exp.Create) and index.kind == "NONCLUSTERED INDEX"
    assert index.this.name == "IX_inbox_handled_at"
    drop = parse_tsql(dialect.schema.drop_statements(table)[0])
    assert isinstance(drop, exp.Drop) and drop.args.get("exists")
    dropped = drop.find(exp.Table)
    assert dropped is not None and (dropped.db, dropped.name) == (name.schema, name.table)


def tsql_inbox_operations() -> dict[str, tuple[str, list[object]]]:
    dialect, table = inbox_of("microsoft", TableName("inbox", "messaging", role="Inbox"))
    calls = {
        "record": lambda c: dialect.inbox.record_message(c, table, "shipping", "m-1"),
        "purge": lambda c: dialect.inbox.inbox_purge_batch(c, table, "2026-10-22 00:00:00", None, 500),
        "purge_consumer": lambda c: dialect.inbox.inbox_purge_batch(
            c, table, "2026-10-22 00:00:00", "shipping", 500),
    }
    return recorded(calls)


def test_tsql_inbox_dml_matches_golden() -> None:
    assert_golden("microsoft_inbox_dml.sql", golden_text(tsql_inbox_operations()))


@pytest.mark.parametrize("operation", ["record", "purge", "purge_consumer"])
def test_every_tsql_inbox_dml_statement_parses(operation: str) -> None:
    sql, params = tsql_inbox_operations()[operation]
    tree = parse_tsql(as_tsql_parameters(sql))
    # sqlglot reads DELETE TOP (n) as a table named TOP; the golden file pins the text.
    tables = {(t.db, t.name) for t in tree.find_all(exp.Table) if t.name != "TOP"}
    assert tables == {("messaging", "inbox")}
    assert sql.count("%s") == len(params)


def test_tsql_inbox_record_probes_with_a_key_range_lock() -> None:
    sql, params = tsql_inbox_operations()["record"]
    tree = parse_tsql(as_tsql_parameters(sql))
    assert isinstance(tree, exp.Insert)
    # The probe holds an update lock on the key range until commit, so a concurrent
    # delivery of the same message waits instead of also finding it absent.
    probe = sql.split("NOT EXISTS", 1)[1]
    assert "WITH (UPDLOCK, HOLDLOCK)" in probe
    assert params == ["shipping", "m-1", "shipping", "m-1"]
    purge, _ = tsql_inbox_operations()["purge"]
    assert "WITH (READCOMMITTEDLOCK, READPAST, ROWLOCK)" in purge
    assert "CAST(@p2 AS DATETIME2(3))" in as_tsql_parameters(purge)


def test_every_tsql_readpast_comes_with_readcommittedlock() -> None:
    """READPAST is refused at READ COMMITTED under READ_COMMITTED_SNAPSHOT (the Azure SQL
    default) unless READCOMMITTEDLOCK is in the same hint list: the claim and both purges
    must all run there."""
    dialect = MicrosoftDialect(TableName("outbox", "messaging"))
    statements = [sql for sql, _ in tsql_operations(dialect).values()]
    statements += [sql for sql, _ in dialect.claim.statements().values()]
    statements += [sql for sql, _ in tsql_inbox_operations().values()]
    hint_lists = [hints for sql in statements
                  for hints in re.findall(r"WITH \(([A-Z, ]+)\)", sql) if "READPAST" in hints]
    assert len(hint_lists) >= 3  # the claim, the outbox purge, the inbox purge
    for hints in hint_lists:
        assert "READCOMMITTEDLOCK" in hints.split(", "), hints


# -- what a DBA asks about ---------------------------------------------------------------


def sequential_key_text() -> str:
    """What ``outbox_sql --optimize-sequential-key`` prints, on and off, for both tables."""
    dialect = MicrosoftDialect(TableName("outbox", "messaging"))
    tables = {"outbox": dialect.schema.outbox,
              "inbox": dialect.schema.inbox(TableName("inbox", "messaging", role="Inbox"))}
    return "".join(
        f"-- {kind} {'on' if on else 'off'}\n{statement}\n\n"
        for kind, table in tables.items() for on in (True, False)
        for statement in dialect.schema.sequential_key_statements(table, on=on)
    )


def test_tsql_sequential_key_option_matches_golden() -> None:
    assert_golden("microsoft_sequential_key.sql", sequential_key_text())


def test_tsql_sequential_key_option_is_compiled_only_where_it_exists() -> None:
    """SQL Server 2016/2017 reject OPTIMIZE_FOR_SEQUENTIAL_KEY at compile time, even in
    an IF branch not taken: the ALTER must be dynamic SQL behind the version guard."""
    [statement] = MicrosoftDialect(TableName("outbox")).schema.sequential_key_statements(
        MicrosoftDialect(TableName("outbox")).schema.outbox)
    guard, dynamic = statement.removeprefix("IF ").split("\n    EXEC(N'")
    parse_tsql(f"SELECT CASE WHEN {guard} THEN 1 ELSE 0 END")
    assert "'ProductMajorVersion') AS INT) >= 15" in guard
    assert "'EngineEdition') AS INT) IN (5, 8)" in guard
    assert dynamic == ("ALTER INDEX [PK_outbox] ON [dbo].[outbox] "
                       "SET (OPTIMIZE_FOR_SEQUENTIAL_KEY = ON)');")
    # sqlglot has no grammar for ALTER INDEX ... SET; the golden file pins the text.
    alter = sqlglot.parse_one(dynamic.removesuffix("');"), read="tsql")
    assert isinstance(alter, exp.Command) and alter.name.upper() == "ALTER"


def test_tsql_purge_batches_stay_below_lock_escalation() -> None:
    """5,000 locks on one table or index make SQL Server escalate to a table lock."""
    assert MicrosoftPurge.max_delete_batch <= 4_000


# -- the other vendors' DML --------------------------------------------------------------
class RowsCursor(RecordingCursor):
    """A recording cursor whose reads find two rows, so statements that read first
    (a renewal's look for rows no one holds) send what follows."""

    def fetchall(self) -> list[tuple[object, ...]]:
        return [(1, "a"), (2, "b")]


def vendor_operations(vendor: str) -> dict[str, list[tuple[str, list[object]]]]:
    """Every DML statement of ``vendor``'s store but the claim (committed apart:
    tests/test_claim_sql.py), rendered with sample arguments."""
    dialect = dialect_for(vendor, TableName("outbox"))
    calls: dict[str, Any] = settlement_calls(dialect)
    rendered = {}
    for name, call in calls.items():
        cursor = RowsCursor()
        call(cursor)
        rendered[name] = cursor.statements
    return rendered


@pytest.mark.parametrize("vendor", ["postgresql", "mysql", "sqlite"])
def test_dml_matches_golden(vendor: str) -> None:
    """What each vendor's relay sends besides its claim, with its parameters in order: a
    change to that SQL or to the order of its parameters shows here first."""
    text = "".join(
        f"-- {name} {params!r}\n{sql};\n\n"
        for name, statements in vendor_operations(vendor).items()
        for sql, params in statements
    )
    assert_golden(f"{vendor}_dml.sql", text)


# -- the schema_version column ---------------------------------------------------------


def test_versioned_insert_adds_only_the_schema_version() -> None:
    """Rows without a version leave the column out of the INSERT."""
    dialect = MicrosoftDialect(TableName("outbox"))
    plain, versioned = dialect.inserts.insert_sql(2), dialect.inserts.insert_sql(2, versioned=True)
    insert = parse_tsql(versioned.replace("%s", "?"))
    assert isinstance(insert, exp.Insert)
    assert [c.name for c in insert.this.expressions] == [*INSERT_COLUMNS, "schema_version"]
    assert versioned.count("%s") == plain.count("%s") + 2


# -- the relay registry and the partitioned claim ------------------------------------------

@pytest.mark.parametrize("schema", [None, "messaging"])
def test_tsql_relay_registry_parses(schema: str | None) -> None:
    dialect = MicrosoftDialect(TableName("outbox", schema))
    [batch] = dialect.schema.create_statements(dialect.schema.registry)
    block = parse_tsql(batch)
    assert isinstance(block, exp.IfBlock)
    create = block.find(exp.Create)
    assert create is not None and f"[{schema or 'dbo'}].[outbox_relays]" in create.sql("tsql")
    [drop] = dialect.schema.drop_statements(dialect.schema.registry)
    assert isinstance(parse_tsql(drop), exp.Drop)


def test_sqlite_does_not_share_the_aggregates_out() -> None:
    """One writer: its relays take turns, and its outbox indexes no bucket."""
    dialect = dialect_for("sqlite", TableName("outbox"))
    assert not dialect.features.shares_aggregates and not dialect.schema.indexes_buckets


# -- release 0.2.0: the one-write relay's tables, and the outbox refusing claims -----------

RELEASE_0_2_0_TABLES = {"buckets": "outbox_buckets", "in_flight": "outbox_in_flight",
                        "outbox": "outbox"}


@pytest.mark.parametrize("schema", [None, "messaging"])
@pytest.mark.parametrize("kind", sorted(RELEASE_0_2_0_TABLES))
def test_every_tsql_statement_of_release_0_2_0_parses(kind: TableKind,
                                                      schema: str | None) -> None:
    """What migration 0003 runs on SQL Server, both ways: each statement one tree sqlglot
    reads whole, naming only its own table (and the catalog its guard reads)."""
    for forwards in (True, False):
        statements = released("0.2.0", kind, "microsoft", schema=schema, table="outbox",
                              forwards=forwards)
        assert statements
        for statement in statements:
            tree = parse_tsql(statement)
            # sqlglot reads the constraint DROP CONSTRAINT names as a table, unqualified.
            tables = {(t.db, t.name) for t in tree.find_all(exp.Table)
                      if t.db not in ("", "sys")}
            assert tables == {(schema or "dbo", RELEASE_0_2_0_TABLES[kind])}, statement


def test_tsql_release_0_2_0_seeds_the_buckets_and_refuses_claims_under_a_guard() -> None:
    create, seed = released("0.2.0", "buckets", "microsoft", table="outbox")
    assert isinstance(parse_tsql(create), exp.IfBlock)
    insert = parse_tsql(seed)
    assert isinstance(insert, exp.Insert) and insert.find(exp.Exists) is not None
    assert "< 256 AND NOT EXISTS" in seed  # the count written in: sent with no parameters

    hand_back, refuse = released("0.2.0", "outbox", "microsoft", table="outbox")
    update = parse_tsql(hand_back)
    assert isinstance(update, exp.Update)
    assert update.sql("tsql") == ("UPDATE [dbo].[outbox] SET [status] = 0, [claimed_at] = NULL, "
                                  "[next_retry_at] = NULL WHERE [status] = 1")
    block = parse_tsql(refuse)
    assert isinstance(block, exp.IfBlock)
    guard = block.this.sql("tsql")
    assert "sys.check_constraints WHERE name = N'CK_outbox_claimed_needs_0_2'" in guard
    assert "parent_object_id = OBJECT_ID(N'[dbo].[outbox]', N'U')" in guard
    assert ("ALTER TABLE [dbo].[outbox] ADD CONSTRAINT [CK_outbox_claimed_needs_0_2] "
            "CHECK ([status] <> 1)") in refuse
    [drop] = released("0.2.0", "outbox", "microsoft", table="outbox", forwards=False)
    assert isinstance(parse_tsql(drop), exp.Alter)
    assert drop == ("ALTER TABLE [dbo].[outbox] "
                    "DROP CONSTRAINT IF EXISTS [CK_outbox_claimed_needs_0_2]")
