"""Django's flush (``manage.py flush``, ``sqlflush``, ``TransactionTestCase`` teardown)
empties eventferry's tables, schema-qualified or not, on every vendor."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from eventferry_django.ddl import create_statements
from eventferry_django.naming import TableName

SCHEMA_DDL = {
    "postgresql": ('CREATE SCHEMA IF NOT EXISTS "{0}"', 'DROP SCHEMA IF EXISTS "{0}"'),
    "mysql": ("CREATE DATABASE IF NOT EXISTS `{0}`", "DROP DATABASE IF EXISTS `{0}`"),
    "microsoft": ("IF SCHEMA_ID(N'{0}') IS NULL EXEC(N'CREATE SCHEMA [{0}]')",
                  "DROP SCHEMA IF EXISTS [{0}]"),
}


def execute(statements: list[str]) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def rows(name: TableName) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {name.quoted(connection.vendor)}")
        (count,) = cursor.fetchone()
    return int(count)


def fill(outbox: TableName, inbox: TableName) -> None:
    """One row in each table."""
    vendor = connection.vendor
    inserts = [
        (f"INSERT INTO {outbox.quoted(vendor)} (message_id, topic, aggregate_type, "
         "aggregate_id, payload) VALUES (%s, %s, %s, %s, %s)", ["m-1", "t", "a", "1", "{}"]),
        (f"INSERT INTO {inbox.quoted(vendor)} (consumer, message_id) VALUES (%s, %s)",
         ["c", "m-1"]),
    ]
    with connection.cursor() as cursor:
        for sql, params in inserts:
            cursor.execute(sql, params)


def flush() -> None:
    """As a ``TransactionTestCase`` teardown does (without identity reseeds, which the
    T-SQL endpoint's DBCC CHECKIDENT fails on)."""
    call_command("flush", interactive=False, verbosity=0, reset_sequences=False)


@pytest.mark.django_db(transaction=True)
def test_flush_empties_the_outbox_and_the_inbox() -> None:
    outbox, inbox = TableName("outbox"), TableName("inbox", role="Inbox")
    fill(outbox, inbox)
    flush()
    assert (rows(outbox), rows(inbox)) == (0, 0)


@pytest.fixture
def schema() -> Iterator[str]:
    """A schema of its own (a database, on MySQL) with eventferry's tables in it."""
    if connection.vendor not in SCHEMA_DDL:
        pytest.skip(f"{connection.vendor} has no schemas")
    name = f"ef_flush_{connection.settings_dict['NAME']}"[:40]
    create, drop = SCHEMA_DDL[connection.vendor]
    execute([create.format(name)])
    try:
        yield name
    finally:
        execute([f"DROP TABLE IF EXISTS {TableName(t, name).quoted(connection.vendor)}"
                 for t in ("outbox", "inbox")])
        execute([drop.format(name)])


@pytest.mark.django_db(transaction=True)
def test_flush_and_sqlflush_cover_tables_in_a_configured_schema(schema: str) -> None:
    outbox, inbox = TableName("outbox", schema), TableName("inbox", schema, role="Inbox")
    with override_settings(EVENTFERRY={"SCHEMA": schema}):
        execute(create_statements(connection.vendor) + create_statements(connection.vendor,
                                                                          "inbox"))
        printed = io.StringIO()
        call_command("sqlflush", stdout=printed)
        for name in (outbox, inbox):
            assert connection.ops.quote_name(name.orm_db_table(connection.vendor)) \
                in printed.getvalue()
        fill(outbox, inbox)
        flush()
        assert (rows(outbox), rows(inbox)) == (0, 0)
