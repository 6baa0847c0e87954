"""What Django's flush misses: eventferry's tables outside the connection's default
schema (the outbox, the inbox, the Django tasks' results), and the tables beside the
outbox that no model describes: the relay registry, the batches in flight and the bucket
leases.

Django's flush (``manage.py flush``, ``sqlflush``, the teardown of every
``TransactionTestCase``) empties the models' tables that introspection lists, matched by
``db_table``. Introspection lists the bare names of the connection's default schema only,
while our models' ``db_table`` is schema-qualified wherever our own SQL is (always on SQL
Server, ``dbo].[outbox``; on PostgreSQL and MySQL when ``SCHEMA`` is set), so no vendor's
flush ever matches them and their rows survive it. The ``flush`` and ``sqlflush`` commands
of this app add these tables, emptied by the backend's own flush SQL. They add the relay
registry and the batches in flight too, and free every bucket lease (the 256 bucket rows
stay): a relay killed in one test must not count as live, nor hold buckets, in the next.
"""

from __future__ import annotations

from django.apps import apps
from django.core.management.color import Style
from django.db import router
from django.db.backends.base.base import BaseDatabaseWrapper

from .conf import get_settings
from .naming import QUOTES, TableName
from .store import dialect_for
from .store.bucket_leases import BucketLeaseSql


def unseen_tables(connection: BaseDatabaseWrapper) -> list[str]:
    """The ``db_table`` of each of eventferry's tables that exists on ``connection`` under
    a schema-qualified name, which Django's flush cannot match, and of the relay registry
    and the batches in flight where they exist."""
    vendor = connection.vendor
    if vendor not in QUOTES or not apps.is_installed("eventferry_django"):
        return []
    from .models import InboxMessage, OutboxEvent, TaskResultRecord

    settings = get_settings()
    tables = []
    for model, name in ((OutboxEvent, settings.table_name),
                        (InboxMessage, settings.inbox_table_name),
                        (TaskResultRecord, settings.table_name.task_results)):
        located = name.for_vendor(vendor)
        if located.schema is None or not router.allow_migrate_model(connection.alias, model):
            continue
        if _exists(connection, located):
            tables.append(name.orm_db_table(vendor))
    for name in (settings.table_name.relay_registry, settings.table_name.in_flight):
        if _beside_the_outbox(connection, name):
            tables.append(name.orm_db_table(vendor))
    return tables


def _beside_the_outbox(connection: BaseDatabaseWrapper, name: TableName) -> bool:
    """Whether table ``name``, which lives beside the outbox, exists on ``connection``."""
    from .models import OutboxEvent

    located = name.for_vendor(connection.vendor)
    return router.allow_migrate_model(connection.alias, OutboxEvent) and (
        _exists(connection, located) if located.schema is not None
        else located.table in connection.introspection.table_names())


def _exists(connection: BaseDatabaseWrapper, name: TableName) -> bool:
    # INFORMATION_SCHEMA, in capitals: SQL Server's catalog may be case-sensitive, and
    # PostgreSQL and MySQL read it either way. (SQLite has no schemas, so never gets here.)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM INFORMATION_SCHEMA.TABLES "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            [name.schema, name.table],
        )
        (count,) = cursor.fetchone()
    return int(count) > 0


def flush_sql(
    connection: BaseDatabaseWrapper,
    style: Style,
    *,
    reset_sequences: bool = True,
    allow_cascade: bool = False,
) -> list[str]:
    """The backend's flush SQL for :func:`unseen_tables`, and the statement that frees
    every bucket lease (empty when there is nothing to do)."""
    tables = unseen_tables(connection)
    statements = list(connection.ops.sql_flush(
        style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
    )) if tables else []
    outbox = get_settings().table_name
    if connection.vendor in QUOTES and apps.is_installed("eventferry_django") and (
            _beside_the_outbox(connection, outbox.bucket_leases)):
        sql, _ = BucketLeaseSql(dialect_for(connection.vendor, outbox).ops).free_all()
        statements.append(sql)
    return statements
