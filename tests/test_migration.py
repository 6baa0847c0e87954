"""The hand-written migrations (releases 0.1.0's and 0.2.0's DDL) on a real database:
idempotent, repairing, reversible, and matching the contract when read back from the
database's own catalog (migration 0003's own behaviour: tests/test_one_write_migration.py)."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.db import connection, connections, models, transaction
from django.test import override_settings
from django.test.utils import isolate_apps

from eventferry_django import conf, publish_event
from eventferry_django.contract import bucket_of
from eventferry_django.ddl import ROUTED_BY, TableKind, create_statements
from eventferry_django.models import InboxMessage, OutboxEvent
from eventferry_django.naming import TableName
from eventferry_django.store import dialect_for
from eventferry_django.store.postgresql import PostgresqlSchema
from eventferry_django.store.tables import (
    COLUMNS,
    INBOX_COLUMNS,
    TASK_RESULT_COLUMNS,
    Column,
    Table,
)

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
        (c.name, c.nullable) for c in COLUMNS
    ]
    for column, kind in EXPECTED_TYPES[connection.vendor].items():
        assert info.types[column] == kind, column
    if connection.vendor == "mysql":
        # MySQL has a JSON type; MariaDB spells JSON as LONGTEXT plus a json_valid CHECK.
        assert info.types["payload"] in {"json", "longtext"}

    for index in dialect_for(connection.vendor, name).schema.indexes():
        found = info.indexes[index.name]
        if connection.features.supports_covering_indexes:
            assert (found.keys, found.included) == (list(index.keys), list(index.include))
        else:
            assert found.keys == list(index.keys + index.include)
        supports_partial = connection.vendor != "mysql"
        filtered = index.open_rows_only or index.closed_rows_only or index.fresh_rows_only
        assert found.partial is (filtered and supports_partial), index.name

    expected_constraints = {name.message_id_unique, name.status_check, name.claimed_check}
    if connection.vendor != "sqlite":  # there two triggers, which the catalog lists apart
        expected_constraints.add(name.claimed_needs_0_2_check)
    if connection.vendor in {"mysql", "sqlite", "microsoft"}:
        expected_constraints |= {name.payload_check, name.headers_check}
    if connection.vendor in {"postgresql", "microsoft"}:
        expected_constraints.add(name.primary_key)
    assert expected_constraints <= info.constraints


@pytest.mark.parametrize(("model", "columns"), [(OutboxEvent, COLUMNS),
                                                (InboxMessage, INBOX_COLUMNS)])
def test_model_fields_are_the_contracts_columns(
    model: type[models.Model], columns: tuple[Column, ...]
) -> None:
    """The model is declared by hand (Django needs its fields, the migration's DDL is
    frozen), so it is pinned to the one list of the contract's columns: names, order,
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
    built = [i.name for i in dialect_for(connection.vendor, DEFAULT).schema.indexes()]
    for index in built:
        introspection.drop_index(connection, DEFAULT, index)
    assert not set(built) & set(introspection.describe(connection, DEFAULT).indexes)

    # As a DBA re-running what outbox_sql prints would.
    run_ddl(create_statements(connection.vendor))

    assert OutboxEvent.objects.get().payload_data == {"kept": True}
    assert_matches_contract(DEFAULT)


def tables() -> dict[TableKind, TableName]:
    return {"outbox": DEFAULT, "inbox": INBOX, "relays": DEFAULT.relay_registry,
            "task_results": DEFAULT.task_results, "buckets": DEFAULT.bucket_leases,
            "in_flight": DEFAULT.in_flight}


@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_reverse_drops_every_table_and_forward_recreates_them() -> None:
    call_command("migrate", "eventferry_django", "zero", verbosity=0)
    assert not any(introspection.exists(connection, name) for name in tables().values())
    call_command("migrate", "eventferry_django", verbosity=0)
    assert all(introspection.exists(connection, name) for name in tables().values())
    assert_matches_contract(DEFAULT)
    assert_inbox_matches_its_description()


@pytest.mark.django_db
def test_migrations_match_the_model() -> None:
    # Exits non-zero (SystemExit) if the model drifted from its migrations.
    call_command("makemigrations", "eventferry_django", check=True, dry_run=True,
                 stdout=io.StringIO())


@pytest.mark.parametrize(("migration", "release", "flags"), [
    ("0001", "0.1.0", ()), ("0001", "0.1.0", ("--inbox",)),
    ("0001", "0.1.0", ("--relay-registry",)), ("0001", "0.1.0", ("--task-results",)),
    ("0003", "0.2.0", ()), ("0003", "0.2.0", ("--buckets",)), ("0003", "0.2.0", ("--in-flight",)),
])
@pytest.mark.django_db(transaction=True)
def test_sqlmigrate_prints_the_same_ddl_as_outbox_sql(migration: str, release: str,
                                                      flags: tuple[str, ...]) -> None:
    """What a DBA reviews is what migrate runs, release by release and table by table,
    both ways."""
    for sqlmigrate_args, outbox_sql_args in (([], []), (["--backwards"], ["--reverse"])):
        out = io.StringIO()
        call_command("sqlmigrate", "eventferry_django", migration, *sqlmigrate_args,
                     stdout=out)
        printed = io.StringIO()
        call_command("outbox_sql", *flags, "--release", release, *outbox_sql_args,
                     stdout=printed)
        statements = printed.getvalue().strip().split(";\n")
        assert statements
        for statement in statements:
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
        for _ in range(2):
            run_ddl(create_statements(connection.vendor))
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


# -- the inbox ------------------------------------------------------------------------------

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


# -- the outbox's autovacuum tuning (PostgreSQL) ----------------------------------------------

@pytest.mark.skipif("connection.vendor != 'postgresql'")
@pytest.mark.django_db
def test_the_outbox_is_tuned_for_autovacuum_as_a_queue_table() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE oid = %s::regclass",
                       [DEFAULT.quoted("postgresql")])
        (options,) = cursor.fetchone()
    assert set(options) == {f"{name}={value}" for name, value in PostgresqlSchema.AUTOVACUUM}


# -- the tables beside the outbox -------------------------------------------------------------

@pytest.mark.django_db
def test_the_relay_registry_and_the_task_results_are_created_beside_the_outbox() -> None:
    registry = introspection.describe(connection, DEFAULT.relay_registry)
    assert [c for c, _, _ in registry.columns] == ["id", "instance", "relay_id", "seen_at"]
    results = introspection.describe(connection, DEFAULT.task_results)
    assert [(c, nullable) for c, _, nullable in results.columns] == [
        (c.name, c.nullable) for c in TASK_RESULT_COLUMNS]


@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_publish_writes_the_bucket_its_index_serves() -> None:
    with transaction.atomic():
        publish_event("t", {"kept": True}, aggregate_type="a", aggregate_id="order-7")
    assert OutboxEvent.objects.get().bucket == bucket_of("order-7")
    indexed = dialect_for(connection.vendor, DEFAULT).schema.indexes_buckets
    assert (DEFAULT.bucket_index in introspection.describe(connection, DEFAULT).indexes) is indexed


def test_every_table_has_its_ddl() -> None:
    assert set(tables()) == set(ROUTED_BY)
