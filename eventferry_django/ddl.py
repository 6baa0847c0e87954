"""The DDL of eventferry's tables (the outbox, the inbox) for a connection or a named
vendor, from the settings.

The released migrations run their frozen statements (:mod:`.released_ddl`), and
``manage.py outbox_sql`` prints those same statements, so what a DBA reviews is byte for
byte what ``migrate`` runs. :data:`RELEASES` says, for each released migration, which
table it concerns and how the live code rendered it, once, when it was frozen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .conf import get_settings
from .naming import TableName
from .released_ddl import (
    SENTINEL_SCHEMA,
    SENTINEL_TABLE,
    released_statements,
    template,
)
from .store import Dialect, dialect_for
from .store.schema import SchemaSql
from .store.tables import Table

#: eventferry's tables, as the migrations and ``outbox_sql`` name them.
TableKind = Literal["outbox", "inbox", "relays"]


@dataclass(frozen=True)
class Release:
    """A released migration's DDL: the table it concerns and how the live schema part
    rendered its statements (forwards, or backwards) when it was frozen."""

    kind: TableKind
    render: Callable[[SchemaSql, Table, bool], list[str]]
    description: str


def _create_or_drop(schema: SchemaSql, table: Table, forwards: bool) -> list[str]:
    return schema.create_statements(table) if forwards else schema.drop_statements(table)


#: Every released migration that runs vendor DDL, by name. A new one is added here and
#: frozen with ``scripts/freeze_released_ddl.py`` (see docs/development.md).
RELEASES: dict[str, Release] = {
    "0001_initial": Release("outbox", _create_or_drop, "the outbox table and its indexes"),
    "0004_inbox": Release("inbox", _create_or_drop, "the inbox table and its index"),
    "0005_open_rows_index": Release(
        "outbox", lambda schema, _, forwards: schema.open_rows_index_statements(
            forwards=forwards),
        "the open-rows index in place of the first release's head-of-aggregate index"),
    "0006_outbox_autovacuum": Release(
        "outbox", lambda schema, _, forwards: schema.autovacuum_statements(forwards=forwards),
        "the outbox's autovacuum tuning (PostgreSQL only)"),
    "0007_closed_rows_index": Release(
        "outbox", lambda schema, _, forwards: schema.closed_rows_index_statements(
            forwards=forwards),
        "the retention index over closed rows only, where the vendor filters indexes"),
    "0008_schema_version": Release(
        "outbox", lambda schema, _, forwards: schema.schema_version_statements(
            forwards=forwards),
        "the outbox's nullable schema_version column (SQLite's unguarded: the migration "
        "reads the table's columns first)"),
    "0009_relay_registry": Release("relays", _create_or_drop,
                                   "the relay registry beside the outbox"),
    "0010_claim_buckets": Release(
        "outbox", lambda schema, _, forwards: schema.bucket_statements(forwards=forwards),
        "the outbox's nullable bucket column and the index of each bucket's fresh rows "
        "(SQLite: the column alone, unguarded: the migration reads the table's columns "
        "first)"),
}


def table_name(kind: TableKind = "outbox", *, schema: str | None = None,
               table: str | None = None) -> TableName:
    """The ``kind`` table's validated name; arguments left as None come from
    ``EVENTFERRY``."""
    settings = get_settings()
    schema = schema if schema is not None else settings.schema
    if kind != "inbox":  # the relay registry's name follows its outbox's
        return TableName(table if table is not None else settings.table, schema)
    return TableName(table if table is not None else settings.inbox_table, schema, role="Inbox")


def table_ddl(
    vendor: str,
    kind: TableKind = "outbox",
    *,
    schema: str | None = None,
    table: str | None = None,
    native_json: bool | None = None,
) -> tuple[Dialect, Table]:
    """The live dialect for ``vendor`` and the ``kind`` table it renders (for DDL no
    migration runs, and for freezing a new migration's); ``table`` names that table,
    (for the relay registry: its outbox), and arguments left as None come from
    ``EVENTFERRY``."""
    settings = get_settings()
    outbox = table_name(schema=schema, table=table if kind != "inbox" else None)
    dialect = dialect_for(
        vendor, outbox, native_json=settings.native_json if native_json is None else native_json,
    )
    if kind == "outbox":
        return dialect, dialect.schema.outbox
    if kind == "relays":
        return dialect, dialect.schema.registry
    return dialect, dialect.schema.inbox(table_name("inbox", schema=schema, table=table))


def released(
    migration: str, vendor: str, *, forwards: bool = True, schema: str | None = None,
    table: str | None = None, native_json: bool | None = None,
) -> list[str]:
    """What the released ``migration`` runs on ``vendor``, forwards or backwards, for the
    table the settings (or ``schema``/``table``) name."""
    name = table_name(RELEASES[migration].kind, schema=schema, table=table)
    if native_json is None:
        native_json = get_settings().native_json
    return released_statements(migration, vendor, name, forwards=forwards,
                               native_json=native_json)


def freeze(migration: str, vendor: str, *, native_json: bool = False) -> str:
    """The template file of ``migration`` on ``vendor``, rendered by today's live code:
    run once, when the migration is released (``scripts/freeze_released_ddl.py``)."""
    release = RELEASES[migration]
    dialect, table = table_ddl(vendor, release.kind, schema=SENTINEL_SCHEMA,
                               table=SENTINEL_TABLE, native_json=native_json)
    header = (f"Migration {migration} on {vendor}{' with NATIVE_JSON' if native_json else ''}:"
              f" {release.description}.\nReleased DDL: never edit this file (see "
              "eventferry_django/released_ddl.py).")
    return template(header, release.render(dialect.schema, table, True),
                    release.render(dialect.schema, table, False))


#: The released migration that creates each table.
CREATED_BY: dict[TableKind, str] = {"outbox": "0001_initial", "inbox": "0004_inbox",
                                    "relays": "0009_relay_registry"}


def create_statements(vendor: str, kind: TableKind = "outbox") -> list[str]:
    """What the migration of the ``kind`` table runs forwards on ``vendor``."""
    return released(CREATED_BY[kind], vendor)


def drop_statements(vendor: str, kind: TableKind = "outbox") -> list[str]:
    """What it runs backwards."""
    return released(CREATED_BY[kind], vendor, forwards=False)


def open_rows_index_statements(vendor: str, *, forwards: bool = True) -> list[str]:
    """What migration 0005 runs on ``vendor``: the open-rows index in, the first
    release's head-of-aggregate index out (the other way round backwards)."""
    return released("0005_open_rows_index", vendor, forwards=forwards)


def autovacuum_statements(vendor: str, *, forwards: bool = True) -> list[str]:
    """What migration 0006 runs on ``vendor``: the outbox's autovacuum tuning (PostgreSQL
    only; nothing elsewhere), or back to the server's defaults backwards."""
    return released("0006_outbox_autovacuum", vendor, forwards=forwards)


def closed_rows_index_statements(vendor: str, *, forwards: bool = True) -> list[str]:
    """What migration 0007 runs on ``vendor``: the retention index filtered on the closed
    statuses in, the unfiltered one out (the other way round backwards); nothing on
    MariaDB/MySQL, which have no filtered indexes."""
    return released("0007_closed_rows_index", vendor, forwards=forwards)


def bucket_statements(vendor: str, *, forwards: bool = True) -> list[str]:
    """What migration 0010 runs on ``vendor``: the outbox's nullable ``bucket`` column and
    the index of each bucket's fresh rows (the column alone on SQLite), or both dropped
    backwards."""
    return released("0010_claim_buckets", vendor, forwards=forwards)


def schema_version_statements(vendor: str, *, forwards: bool = True) -> list[str]:
    """What migration 0008 runs on ``vendor``: the outbox's nullable ``schema_version``
    column added, guarded (dropped backwards). SQLite's cannot be guarded in SQL: the
    migration looks at the table first (``dialect.schema.guards_columns``)."""
    return released("0008_schema_version", vendor, forwards=forwards)
