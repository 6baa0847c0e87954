"""The hand-written migration on a real database: idempotent, repairing, reversible, and
matching the contract when read back from the database's own catalog."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.db import connection, connections, models, transaction
from django.test import override_settings
from django.test.utils import isolate_apps

from eventferry_django import conf, publish_event
from eventferry_django.contract import bucket_of
from eventferry_django.ddl import (
    autovacuum_statements,
    bucket_statements,
    closed_rows_index_statements,
    create_statements,
    schema_version_statements,
)
from eventferry_django.models import InboxMessage, OutboxEvent
from eventferry_django.naming import TableName
from eventferry_django.store import dialect_for
from eventferry_django.store.postgresql import PostgresqlSchema
from eventferry_django.store.tables import INBOX_COLUMNS, MIGRATED_COLUMNS, Column, Table

from . import introspection
from .engine_gaps import babelfish_gap

DEFAULT = TableName("outbox")

#: The type each vendor reports for a few telling columns.
EXPECTED_TYPES = {
    "postgresql": {"id": "bigint", "payload": "jsonb", "status": "smallint",
                   "created_at": "timestamp with time zone", "message_id": "character varying"},
    "mysql": {"id": "bigint", "status": "tinyint", "created_at": "datetime",
              "message_id": "varchar"},
    "sqlite": {"id": "integer", "payload": "text", "status": "smallint",
               "created_at": "datetime", "message_id": "varchar(64)"},
    "microsoft": {"id": "bigint", "payload": "nvarchar", "status": "tinyint",
                  "created_at": "datetime2", "message_id": "nvarchar"},
}
#: Babelfish lists an index in sys.indexes under a lowercased, hash-suffixed name, so the
#: guards of the index DDL (and tests/introspection.py) do not find what they created.
SYS_INDEXES_GAP = babelfish_gap(
    "sys-indexes-names", "sys.indexes.name is not the created index name (guarded DDL re-runs)"
)


def run_ddl(statements: list[str]) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def assert_matches_contract(name: TableName) -> None:
    info = introspection.describe(connection, name)
    assert [(c, nullable) for c, _, nullable in info.columns] == [
        (c.name, c.nullable) for c in MIGRATED_COLUMNS
    ]
    for column, kind in EXPECTED_TYPES[connection.vendor].items():
        assert info.types[column] == kind, column
    if connection.vendor == "mysql":
        # MySQL has a JSON type; MariaDB spells JSON as LONGTEXT plus a json_valid CHECK.
        assert info.types["payload"] in {"json", "longtext"}

    for index in dialect_for(connection.vendor, name).schema.migrated_indexes():
        found = info.indexes[index.name]
        if connection.features.supports_covering_indexes:
            assert (found.keys, found.included) == (list(index.keys), list(index.include))
        else:
            assert found.keys == list(index.keys + index.include)
        supports_partial = connection.vendor != "mysql"
        filtered = index.open_rows_only or index.closed_rows_only or index.fresh_rows_only
        assert found.partial is (filtered and supports_partial), index.name

    expected_constraints = {name.message_id_unique, name.status_check, name.claimed_check}
    if connection.vendor in {"mysql", "sqlite", "microsoft"}:
        expected_constraints |= {name.payload_check, name.headers_check}
    if connection.vendor in {"postgresql", "microsoft"}:
        expected_constraints.add(name.primary_key)
    assert expected_constraints <= info.constraints


@pytest.mark.parametrize(("model", "columns"), [(OutboxEvent, MIGRATED_COLUMNS),
                                                (InboxMessage, INBOX_COLUMNS)])
def test_model_fields_are_the_contracts_columns(
    model: type[models.Model], columns: tuple[Column, ...]
) -> None:
    """The model is declared by hand (Django needs its fields, migration 0001 is
    released), so it is pinned to the one list of the contract's columns: names, order,
    nullability and text widths."""
    fields = model._meta.concrete_fields
    assert [(f.column, f.null) for f in fields] == [(c.name, c.nullable) for c in columns]
    widths = {c.name: int(c.kind.removeprefix("text")) for c in columns
              if c.kind.startswith("text")}
    assert {f.column: f.max_length for f in fields if isinstance(f, models.CharField)} == widths


@SYS_INDEXES_GAP
@pytest.mark.django_db
def test_migrated_table_matches_the_contract() -> None:
    assert_matches_contract(DEFAULT)


@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_ddl_applied_twice_succeeds_and_keeps_data() -> None:
    with transaction.atomic():
        publish_event("t", {"kept": True}, aggregate_type="a", aggregate_id="1")
    run_ddl(create_statements(connection.vendor))
    run_ddl(create_statements(connection.vendor))
    # And through migrate itself: unapply without touching the table, then apply again.
    call_command("migrate", "eventferry_django", "zero", fake=True, verbosity=0)
    call_command("migrate", "eventferry_django", verbosity=0)
    assert OutboxEvent.objects.get().payload_data == {"kept": True}
    assert_matches_contract(DEFAULT)


@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_rerun_repairs_a_partial_deployment() -> None:
    with transaction.atomic():
        publish_event("t", {"kept": True}, aggregate_type="a", aggregate_id="1")
    built = [i.name for i in dialect_for(connection.vendor, DEFAULT).schema.migrated_indexes()]
    for index in built:
        introspection.drop_index(connection, DEFAULT, index)
    assert not set(built) & set(introspection.describe(connection, DEFAULT).indexes)

    # Every migration's DDL, in order, as a DBA re-running what outbox_sql prints would.
    run_ddl(create_statements(connection.vendor))
    run_ddl(closed_rows_index_statements(connection.vendor))
    if dialect_for(connection.vendor, DEFAULT).schema.guards_columns:
        run_ddl(schema_version_statements(connection.vendor))
        run_ddl(bucket_statements(connection.vendor))

    assert OutboxEvent.objects.get().payload_data == {"kept": True}
    assert_matches_contract(DEFAULT)


@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_reverse_drops_the_table_and_forward_recreates_it() -> None:
    call_command("migrate", "eventferry_django", "zero", verbosity=0)
    assert not introspection.exists(connection, DEFAULT)
    call_command("migrate", "eventferry_django", verbosity=0)
    assert_matches_contract(DEFAULT)


@pytest.mark.django_db
def test_migrations_match_the_model() -> None:
    # Exits non-zero (SystemExit) if the model drifted from its migrations.
    call_command("makemigrations", "eventferry_django", check=True, dry_run=True,
                 stdout=io.StringIO())


@pytest.mark.django_db(transaction=True)
def test_sqlmigrate_prints_the_same_ddl_as_outbox_sql() -> None:
    out = io.StringIO()
    call_command("sqlmigrate", "eventferry_django", "0001", stdout=out)
    printed = io.StringIO()
    call_command("outbox_sql", stdout=printed)
    for statement in printed.getvalue().strip().split(";\n"):
        assert statement.strip().rstrip(";") in out.getvalue()


@pytest.fixture
def custom_location() -> Iterator[TableName]:
    """A second schema (a database, on MySQL) the custom-named outbox lives in."""
    vendor = connection.vendor
    schema = None if vendor == "sqlite" else f"eventferry_custom_{connection.settings_dict['NAME']}"[:40]
    name = TableName("custom_outbox", schema)
    create = {
        "postgresql": f'CREATE SCHEMA IF NOT EXISTS "{schema}"',
        "mysql": f"CREATE DATABASE IF NOT EXISTS `{schema}`",
        "microsoft": f"IF SCHEMA_ID(N'{schema}') IS NULL EXEC(N'CREATE SCHEMA [{schema}]')",
    }.get(vendor)
    if create:
        run_ddl([create])
    try:
        yield name
    finally:
        drop = [f"DROP TABLE IF EXISTS {name.quoted(vendor)}"]
        drop += {
            "postgresql": [f'DROP SCHEMA IF EXISTS "{schema}"'],
            "mysql": [f"DROP DATABASE IF EXISTS `{schema}`"],
            "microsoft": [f"DROP SCHEMA IF EXISTS [{schema}]"],
        }.get(vendor, [])
        run_ddl(drop)


@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_custom_schema_and_table_are_honoured_by_ddl_and_orm(custom_location: TableName) -> None:
    setting = {"TABLE": custom_location.table, "SCHEMA": custom_location.schema}
    with override_settings(EVENTFERRY=setting):
        guarded = dialect_for(connection.vendor, custom_location).schema.guards_columns
        for attempt in range(2):
            run_ddl(create_statements(connection.vendor))
            run_ddl(closed_rows_index_statements(connection.vendor))
            if attempt == 0 or guarded:
                run_ddl(schema_version_statements(connection.vendor))
                run_ddl(bucket_statements(connection.vendor))
        assert_matches_contract(custom_location)
        with transaction.atomic():
            message_id = publish_event("t", {"where": "custom"}, aggregate_type="a",
                                       aggregate_id="1")
        db_table = conf.orm_db_table()

    with isolate_apps("tests.testapp"):
        class CustomOutbox(models.Model):
            message_id = models.CharField(max_length=64)

            class Meta:
                app_label = "testapp"
                managed = False

        CustomOutbox._meta.db_table = db_table
        assert list(CustomOutbox.objects.values_list("message_id", flat=True)) == [message_id]
    assert not OutboxEvent.objects.exists()
    if custom_location.schema:
        quoted = connections["default"].ops.quote_name(db_table)
        assert quoted == custom_location.quoted(connection.vendor)


@pytest.mark.skipif("connection.vendor != 'microsoft'")
@pytest.mark.django_db(transaction=True)
def test_the_sequential_key_option_runs_on_the_server_both_ways() -> None:
    """Where the server has OPTIMIZE_FOR_SEQUENTIAL_KEY it is set and unset; where it
    has not (2016, 2017, the T-SQL endpoint) the guard skips it without an error."""
    for kind in ([], ["--inbox"]):
        for reverse in ([], ["--reverse"]):
            printed = io.StringIO()
            call_command("outbox_sql", "--optimize-sequential-key", *kind, *reverse,
                         stdout=printed)
            run_ddl([printed.getvalue()])


# -- the inbox (migration 0004) ------------------------------------------------------------

INBOX = TableName("inbox", role="Inbox")


def inbox_table() -> Table:
    return dialect_for(connection.vendor, DEFAULT).schema.inbox(INBOX)


def assert_inbox_matches_its_description() -> None:
    table = inbox_table()
    info = introspection.describe(connection, INBOX)
    assert [(c, nullable) for c, _, nullable in info.columns] == [
        (c.name, c.nullable) for c in INBOX_COLUMNS
    ]
    assert info.types["message_id"] == EXPECTED_TYPES[connection.vendor]["message_id"]
    assert info.types["handled_at"] == EXPECTED_TYPES[connection.vendor]["created_at"]
    [unique] = table.uniques
    [retention] = table.indexes
    assert info.indexes[retention.name].keys == ["handled_at"]
    # The unique constraint is backed by an index the dedupe probe seeks on (SQLite
    # names it sqlite_autoindex_...).
    assert ["consumer", "message_id"] in [i.keys for i in info.indexes.values()]
    assert unique.name in info.constraints


def record(consumer: str, message_id: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {INBOX.quoted(connection.vendor)} (consumer, message_id) "
            "VALUES (%s, %s)", [consumer, message_id])


@SYS_INDEXES_GAP
@pytest.mark.django_db
def test_migrated_inbox_matches_its_description() -> None:
    assert_inbox_matches_its_description()


@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_inbox_ddl_applied_twice_repairs_a_missing_index_and_keeps_data() -> None:
    record("shipping", "m-1")
    introspection.drop_index(connection, INBOX, inbox_table().indexes[0].name)
    run_ddl(create_statements(connection.vendor, "inbox"))
    run_ddl(create_statements(connection.vendor, "inbox"))
    assert list(InboxMessage.objects.values_list("consumer", "message_id")) == [
        ("shipping", "m-1")]
    assert_inbox_matches_its_description()


@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_inbox_migration_reverses_alone_and_reapplies() -> None:
    with transaction.atomic():
        publish_event("t", {"kept": True}, aggregate_type="a", aggregate_id="1")
    call_command("migrate", "eventferry_django", "0002", verbosity=0)
    assert not introspection.exists(connection, INBOX)
    # Before 0008 the table has no schema_version column: read what was there.
    assert json.loads(OutboxEvent.objects.values_list("payload", flat=True).get()) == {
        "kept": True}
    call_command("migrate", "eventferry_django", verbosity=0)
    assert_inbox_matches_its_description()


@pytest.mark.django_db(transaction=True)
def test_sqlmigrate_0004_prints_the_same_ddl_as_outbox_sql_inbox() -> None:
    out = io.StringIO()
    call_command("sqlmigrate", "eventferry_django", "0004", stdout=out)
    printed = io.StringIO()
    call_command("outbox_sql", "--inbox", stdout=printed)
    statements = printed.getvalue().strip().split(";\n")
    assert len(statements) >= 2
    for statement in statements:
        assert statement.strip().rstrip(";") in out.getvalue()


# -- the open-rows index (migration 0005) ----------------------------------------------------

def index_names() -> set[str]:
    return set(introspection.describe(connection, DEFAULT).indexes)


@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_0005_swaps_a_first_release_index_for_the_open_rows_index_and_back() -> None:
    with transaction.atomic():
        publish_event("t", {"kept": True}, aggregate_type="a", aggregate_id="1")
    new, old = DEFAULT.aggregate_index, DEFAULT.first_release_aggregate_index
    # A table 0001 created in this release has the new index; 0005 has nothing to do.
    assert new in index_names() and old not in index_names()

    # Unapplied: the first release's index, exactly as that release built it.
    call_command("migrate", "eventferry_django", "0004_inbox", verbosity=0)
    assert old in index_names() and new not in index_names()
    found = introspection.describe(connection, DEFAULT).indexes[old]
    first = dialect_for(connection.vendor, DEFAULT)
    if connection.features.supports_covering_indexes and not first.schema.status_keyed_probe:
        assert (found.keys, found.included) == (["aggregate_id", "id"], ["status"])
    else:
        assert found.keys == ["aggregate_id", "status", "id"] and not found.partial

    # An upgraded install: 0005 builds the open-rows index and drops the old one; run
    # again (guarded), it changes nothing.
    call_command("migrate", "eventferry_django", verbosity=0)
    run_ddl(first.schema.open_rows_index_statements())
    assert new in index_names() and old not in index_names()
    assert OutboxEvent.objects.get().payload_data == {"kept": True}
    assert_matches_contract(DEFAULT)


# -- the outbox's autovacuum tuning (migration 0006) -----------------------------------------

def outbox_reloptions() -> set[str]:
    """The outbox's storage parameters as PostgreSQL's catalog holds them."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = %s::regclass",
                       [DEFAULT.quoted("postgresql")])
        (options,) = cursor.fetchone()
    return set(options or ())


# Migrating back to 0005 unapplies 0007, whose guards look its indexes up by name.
@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_0006_tunes_an_existing_outboxs_autovacuum_and_resets_it() -> None:
    # Runs on every vendor: 0006 must migrate both ways where it has nothing to do.
    postgresql = connection.vendor == "postgresql"
    tuned = {f"{name}={value}" for name, value in PostgresqlSchema.AUTOVACUUM}
    with transaction.atomic():
        publish_event("t", {"kept": True}, aggregate_type="a", aggregate_id="1")
    if postgresql:  # 0001 of this release creates the table with them.
        assert outbox_reloptions() == tuned

    call_command("migrate", "eventferry_django", "0005_open_rows_index", verbosity=0)
    if postgresql:  # reversed: back to the server's defaults
        assert outbox_reloptions() == set()

    # An upgraded install; then again, by hand, which changes nothing.
    call_command("migrate", "eventferry_django", verbosity=0)
    run_ddl(autovacuum_statements(connection.vendor))
    if postgresql:
        assert outbox_reloptions() == tuned
    assert OutboxEvent.objects.get().payload_data == {"kept": True}


# -- the closed-rows retention index (migration 0007) -----------------------------------------

@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_0007_swaps_the_retention_index_for_the_closed_rows_index_and_back() -> None:
    with transaction.atomic():
        publish_event("t", {"kept": True}, aggregate_type="a", aggregate_id="1")
    dialect = dialect_for(connection.vendor, DEFAULT)
    new, old = DEFAULT.closed_index, DEFAULT.retention_index
    filtered = dialect.schema.filtered_retention_index
    # Migrated (0001 builds the released index, 0007 replaces it where it can).
    assert (new in index_names(), old in index_names()) == (filtered, not filtered)

    # Unapplied: the released unfiltered index, exactly as 0001 built it.
    call_command("migrate", "eventferry_django", "0006_outbox_autovacuum", verbosity=0)
    assert old in index_names() and new not in index_names()
    found = introspection.describe(connection, DEFAULT).indexes[old]
    assert found.keys == ["status", "processed_at"] and not found.partial

    # Forwards again, then once more by hand (guarded): the same result, the data kept.
    call_command("migrate", "eventferry_django", verbosity=0)
    run_ddl(closed_rows_index_statements(connection.vendor))
    assert (new in index_names(), old in index_names()) == (filtered, not filtered)
    if filtered:
        found = introspection.describe(connection, DEFAULT).indexes[new]
        assert found.keys == ["status", "processed_at"] and found.partial
    assert OutboxEvent.objects.get().payload_data == {"kept": True}
    assert_matches_contract(DEFAULT)


@pytest.mark.django_db(transaction=True)
def test_sqlmigrate_0007_prints_the_same_ddl_as_outbox_sql() -> None:
    out = io.StringIO()
    call_command("sqlmigrate", "eventferry_django", "0007", stdout=out)
    printed = io.StringIO()
    call_command("outbox_sql", "--closed-rows-index", stdout=printed, stderr=io.StringIO())
    for statement in printed.getvalue().strip().split(";\n"):
        assert statement.strip().rstrip(";") in out.getvalue()


# -- the schema_version column (migration 0008) -----------------------------------------------

def column_names() -> list[str]:
    return [name for name, _, _ in introspection.describe(connection, DEFAULT).columns]


# Unapplying 0008 unapplies 0010 first, whose bucket index is looked up by name.
@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_0008_adds_the_schema_version_column_and_drops_it() -> None:
    with transaction.atomic():
        publish_event("t", {"kept": True}, aggregate_type="a", aggregate_id="1",
                      schema_version="2")
    assert column_names()[-2:] == ["schema_version", "bucket"]

    # Unapplied: the column is gone, the row kept.
    call_command("migrate", "eventferry_django", "0007_closed_rows_index", verbosity=0)
    assert "schema_version" not in column_names()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {DEFAULT.quoted(connection.vendor)}")
        assert cursor.fetchone()[0] == 1

    # Forwards again, then once more (guarded in SQL; on SQLite the step looks first).
    call_command("migrate", "eventferry_django", verbosity=0)
    if dialect_for(connection.vendor, DEFAULT).schema.guards_columns:
        run_ddl(schema_version_statements(connection.vendor))
    call_command("migrate", "eventferry_django", "0007_closed_rows_index", fake=True,
                 verbosity=0)
    call_command("migrate", "eventferry_django", verbosity=0)
    assert column_names().count("schema_version") == 1
    event = OutboxEvent.objects.get()
    assert (event.payload_data, event.schema_version) == ({"kept": True}, None)
    columns = introspection.describe(connection, DEFAULT).columns
    assert [(c, nullable) for c, _, nullable in columns] == [
        (c.name, c.nullable) for c in MIGRATED_COLUMNS]


@pytest.mark.django_db(transaction=True)
def test_sqlmigrate_0008_prints_the_same_ddl_as_outbox_sql() -> None:
    for args, migration_args in (([], []), (["--reverse"], ["--backwards"])):
        out = io.StringIO()
        call_command("sqlmigrate", "eventferry_django", "0008", *migration_args, stdout=out)
        printed = io.StringIO()
        call_command("outbox_sql", "--schema-version", *args, stdout=printed,
                     stderr=io.StringIO())
        statements = printed.getvalue().strip().split(";\n")
        assert statements and "schema_version" in printed.getvalue()
        for statement in statements:
            assert statement.strip().rstrip(";") in out.getvalue()


# -- the relay registry (migration 0009) -------------------------------------------------------

def registry_exists() -> bool:
    return DEFAULT.relay_registry.table in connection.introspection.table_names()


# Unapplying 0009 unapplies 0010 first, whose bucket index is looked up by name.
@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_0009_creates_the_relay_registry_and_drops_it_backwards() -> None:
    with transaction.atomic():
        publish_event("t", {"kept": True}, aggregate_type="a", aggregate_id="1")
    assert registry_exists()
    call_command("migrate", "eventferry_django", "0008_schema_version", verbosity=0)
    assert not registry_exists()
    # Forwards, then once more by hand (guarded): the registry back, the outbox untouched.
    call_command("migrate", "eventferry_django", verbosity=0)
    run_ddl(create_statements(connection.vendor, "relays"))
    assert registry_exists()
    info = introspection.describe(connection, DEFAULT.relay_registry)
    assert [c for c, _, _ in info.columns] == ["id", "instance", "relay_id", "seen_at"]
    assert OutboxEvent.objects.get().payload_data == {"kept": True}


@pytest.mark.django_db(transaction=True)
def test_sqlmigrate_0009_prints_the_registry_ddl() -> None:
    out = io.StringIO()
    call_command("sqlmigrate", "eventferry_django", "0009", stdout=out)
    for statement in create_statements(connection.vendor, "relays"):
        assert statement.strip().rstrip(";") in out.getvalue()


# -- the bucket column and its index (migration 0010) -----------------------------------------

@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_0010_adds_the_bucket_column_and_index_and_drops_them() -> None:
    with transaction.atomic():
        publish_event("t", {"kept": True}, aggregate_type="a", aggregate_id="order-7")
    assert OutboxEvent.objects.get().bucket == bucket_of("order-7")
    indexed = dialect_for(connection.vendor, DEFAULT).schema.indexes_buckets
    assert (DEFAULT.bucket_index in index_names()) is indexed

    # Unapplied: the column and its index are gone, the row kept.
    call_command("migrate", "eventferry_django", "0009_relay_registry", verbosity=0)
    assert "bucket" not in column_names() and DEFAULT.bucket_index not in index_names()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {DEFAULT.quoted(connection.vendor)}")
        assert cursor.fetchone()[0] == 1

    # Forwards again: a row written before has no bucket (any relay claims it).
    call_command("migrate", "eventferry_django", verbosity=0)
    assert column_names().count("bucket") == 1
    assert (DEFAULT.bucket_index in index_names()) is indexed
    assert OutboxEvent.objects.get().bucket is None
    assert_matches_contract(DEFAULT)


@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_0010_run_again_changes_nothing() -> None:
    if not dialect_for(connection.vendor, DEFAULT).schema.guards_columns:
        pytest.skip("SQLite's ALTER TABLE cannot be guarded: the migration looks first")
    run_ddl(bucket_statements(connection.vendor))
    run_ddl(bucket_statements(connection.vendor))
    assert column_names().count("bucket") == 1
    assert_matches_contract(DEFAULT)
