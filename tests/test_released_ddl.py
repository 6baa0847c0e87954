"""The released migrations' DDL is frozen: committed templates, filled with the table
names, emit the released golden files, and no edit to the live DDL code reaches them.

These run without any database."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from eventferry_django import migration_operations
from eventferry_django.ddl import RELEASES, Release, freeze
from eventferry_django.naming import TableName
from eventferry_django.released_ddl import (
    ReleasedDdl,
    fill,
    identifiers,
    load,
    parse,
    placeholders,
    released_statements,
)
from eventferry_django.store import VENDORS, dialect_for
from eventferry_django.store.postgresql import PostgresqlSchema
from eventferry_django.store.schema import SchemaSql

from .golden import assert_golden
from .test_ddl_golden import render

#: The golden file of each released migration's DDL for the default names, forwards and
#: backwards (None: it emits nothing on that vendor, asserted separately).
GOLDEN = {
    "0001_initial": ("{vendor}_default.sql", "{vendor}_reverse.sql"),
    "0004_inbox": ("{vendor}_inbox_default.sql", "{vendor}_inbox_reverse.sql"),
    "0005_open_rows_index": ("{vendor}_open_rows_index.sql",
                             "{vendor}_open_rows_index_reverse.sql"),
    "0006_outbox_autovacuum": ("{vendor}_autovacuum.sql", "{vendor}_autovacuum_reverse.sql"),
    "0007_closed_rows_index": ("{vendor}_closed_rows_index.sql",
                               "{vendor}_closed_rows_index_reverse.sql"),
    "0008_schema_version": ("{vendor}_schema_version.sql",
                            "{vendor}_schema_version_reverse.sql"),
    "0009_relay_registry": ("{vendor}_relay_registry.sql", "{vendor}_relay_registry_reverse.sql"),
    "0010_claim_buckets": ("{vendor}_claim_buckets.sql", "{vendor}_claim_buckets_reverse.sql"),
}
#: Where a released migration does nothing.
EMPTY = {("0006_outbox_autovacuum", vendor) for vendor in ("microsoft", "mysql", "sqlite")} | {
    ("0007_closed_rows_index", vendor) for vendor in ("mysql", "sqlite")}

OPERATIONS: dict[str, type[migration_operations.VendorDdl]] = {
    "0001_initial": migration_operations.CreateOutboxTable,
    "0004_inbox": migration_operations.CreateInboxTable,
    "0005_open_rows_index": migration_operations.ReplaceAggregateIndex,
    "0006_outbox_autovacuum": migration_operations.TuneOutboxAutovacuum,
    "0007_closed_rows_index": migration_operations.ReplaceRetentionIndex,
    "0008_schema_version": migration_operations.AddSchemaVersionColumn,
    "0009_relay_registry": migration_operations.CreateRelayRegistry,
    "0010_claim_buckets": migration_operations.AddClaimBuckets,
}


def default_name(release: Release, name: TableName | None = None) -> TableName:
    if name is not None:
        return name
    return TableName("inbox", role="Inbox") if release.kind == "inbox" else TableName("outbox")


def live(migration: str, vendor: str, name: TableName, *, forwards: bool,
         native_json: bool = False) -> list[str]:
    """What today's live code renders for ``migration`` and table ``name``."""
    release = RELEASES[migration]
    outbox = TableName("outbox", name.schema) if release.kind == "inbox" else name
    dialect = dialect_for(vendor, outbox, native_json=native_json)
    if release.kind == "inbox":
        table = dialect.schema.inbox(name)
    else:
        table = dialect.schema.registry if release.kind == "relays" else dialect.schema.outbox
    return release.render(dialect.schema, table, forwards)


def test_every_migration_with_vendor_ddl_has_a_release() -> None:
    assert set(OPERATIONS) == set(RELEASES) == set(GOLDEN)
    assert {operation.release for operation in OPERATIONS.values()} == set(RELEASES)


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("migration", sorted(RELEASES))
def test_released_ddl_matches_the_golden_files(migration: str, vendor: str) -> None:
    name = default_name(RELEASES[migration])
    forwards = released_statements(migration, vendor, name)
    backwards = released_statements(migration, vendor, name, forwards=False)
    if (migration, vendor) in EMPTY:
        assert forwards == backwards == []
        return
    forwards_file, backwards_file = GOLDEN[migration]
    assert_golden(forwards_file.format(vendor=vendor), render(forwards))
    assert_golden(backwards_file.format(vendor=vendor), render(backwards))


@pytest.mark.parametrize(("golden", "migration", "name", "native_json"), [
    ("microsoft_schema_messaging.sql", "0001_initial", TableName("events", "messaging"), False),
    ("microsoft_native_json.sql", "0001_initial", TableName("outbox", "messaging"), True),
    ("microsoft_inbox_schema_messaging.sql", "0004_inbox",
     TableName("handled", "messaging", role="Inbox"), False),
])
def test_released_tsql_with_a_schema_matches_the_golden_files(
    golden: str, migration: str, name: TableName, native_json: bool
) -> None:
    assert_golden(golden, render(released_statements(migration, "microsoft", name,
                                                     native_json=native_json)))


def named_text(vendor: str) -> str:
    """Every released migration's DDL, both ways, for a table named ``events`` (inbox:
    ``handled``) in the schema ``messaging`` (SQLite: no schema)."""
    schema = None if vendor == "sqlite" else "messaging"
    names = {"outbox": TableName("events", schema), "relays": TableName("events", schema),
             "inbox": TableName("handled", schema, role="Inbox")}
    return "".join(
        f"-- {migration} {'forwards' if forwards else 'backwards'}\n"
        + render(released_statements(migration, vendor, names[RELEASES[migration].kind],
                                     forwards=forwards)) + "\n"
        for migration in sorted(RELEASES) for forwards in (True, False)
    )


@pytest.mark.parametrize("vendor", VENDORS)
def test_released_ddl_for_other_names_matches_the_golden_files(vendor: str) -> None:
    """The placeholders stand wherever a name does: schema-qualified names, literals in
    the guards, every object name derived from the table's."""
    assert_golden(f"{vendor}_released_named.sql", named_text(vendor))


NAMES = [None, TableName("events"), TableName("events", "messaging")]


@pytest.mark.parametrize("native_json", [False, True])
@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize("migration", sorted(RELEASES))
def test_freezing_renders_what_the_live_code_renders_for_any_name(
    migration: str, vendor: str, native_json: bool
) -> None:
    """Freezing is faithful: today's code rendered once for the sentinel names, turned
    into a template and filled with any name, is what today's code renders for that name.
    (What the committed files hold is pinned by the golden files above.)"""
    frozen = parse(freeze(migration, vendor, native_json=native_json))
    release = RELEASES[migration]
    for given in NAMES:
        if given is None or (vendor == "sqlite" and given.schema):
            continue
        name = given if release.kind == "outbox" else TableName(given.table, given.schema,
                                                                role="Inbox")
        values = identifiers(vendor, name)
        for forwards, statements in ((True, frozen.forwards), (False, frozen.backwards)):
            assert [fill(s, values) for s in statements] == live(
                migration, vendor, name, forwards=forwards, native_json=native_json)


#: Edits to the live DDL code, each of which changes what it renders.
LIVE_EDITS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "column types": lambda patch: patch.setattr(
        SchemaSql, "column_type", lambda self, column: "TEXT /* edited */"),
    "create": lambda patch: patch.setattr(
        SchemaSql, "create_statements", lambda self, table=None: ["SELECT 'edited'"]),
    "index definition": lambda patch: patch.setattr(
        SchemaSql, "index_definition",
        lambda self, index, table=None: f"{index.name}_edited ON edited (id)"),
    "drop": lambda patch: patch.setattr(
        SchemaSql, "drop_statements", lambda self, table=None: ["SELECT 'edited'"]),
    "autovacuum": lambda patch: patch.setattr(
        PostgresqlSchema, "AUTOVACUUM", (("autovacuum_enabled", "off"),)),
}


def emitted() -> dict[tuple[str, str, bool], list[str]]:
    """What every released migration's operation emits on every vendor, both ways."""
    return {(migration, vendor, forwards): operation().statements(vendor, forwards=forwards)
            for migration, operation in OPERATIONS.items()
            for vendor in VENDORS for forwards in (True, False)}


def rendered_live() -> dict[tuple[str, str, bool], list[str]]:
    return {(migration, vendor, forwards): live(
                migration, vendor, default_name(RELEASES[migration]), forwards=forwards)
            for migration in RELEASES for vendor in VENDORS for forwards in (True, False)}


@pytest.mark.parametrize("edit", sorted(LIVE_EDITS))
def test_an_edit_to_the_live_ddl_code_does_not_change_a_released_migration(
    edit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    load.cache_clear()
    before, live_before = emitted(), rendered_live()
    LIVE_EDITS[edit](monkeypatch)
    load.cache_clear()
    assert rendered_live() != live_before  # the edit reaches the live code...
    assert emitted() == before  # ...and no released migration


def test_template_files_round_trip() -> None:
    statements = ["CREATE TABLE [eventferry_frozen_schema].[eventferry_frozen_table] (\n"
                  "    [id] INT\n)", "SELECT 1"]
    text = "-- header\n-- [forwards]\n-- [statement]\n{}\n-- [statement]\n{}\n-- [backwards]\n"
    assert parse(text.format(*map(placeholders, statements))) == ReleasedDdl(
        forwards=("CREATE TABLE {{schema_prefix}}[{{table}}] (\n    [id] INT\n)", "SELECT 1"),
        backwards=())


@pytest.mark.parametrize("sql", ["SELECT '{{table}}'", "SELECT 1\n-- [statement]",
                                 "SELECT 'eventferry_frozen_schema.x'", "SELECT 1\n"])
def test_freezing_refuses_sql_it_could_not_give_back_the_same(sql: str) -> None:
    with pytest.raises(ValueError, match=r"freeze|schema"):
        placeholders(sql)
