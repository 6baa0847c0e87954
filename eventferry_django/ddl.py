"""The DDL of eventferry's tables (the outbox, the inbox, the relay registry, the task
results, the bucket leases, the batches in flight) for a connection or a named vendor,
from the settings.

The migrations run the frozen statements of a release (:mod:`.released_ddl`), and
``manage.py outbox_sql`` prints those same statements, so what a DBA reviews is byte for
byte what ``migrate`` runs. :data:`RELEASES` says, for each release, which tables its DDL
concerns and how the live code rendered it, once, when it was frozen.
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
from .store.bucket_leases import BucketLeaseSql
from .store.schema import SchemaSql
from .store.sql import Fragment
from .store.tables import Table

#: eventferry's tables, as the migrations and ``outbox_sql`` name them.
TableKind = Literal["outbox", "inbox", "relays", "task_results", "buckets", "in_flight"]

#: The model whose database router decides where each table goes: the relay registry,
#: the bucket leases and the batches in flight have no model and live beside the outbox.
ROUTED_BY: dict[TableKind, str] = {"outbox": "outboxevent", "inbox": "inboxmessage",
                                   "relays": "outboxevent", "task_results": "taskresultrecord",
                                   "buckets": "outboxevent", "in_flight": "outboxevent"}


def _create_or_drop(schema: SchemaSql, table: Table, forwards: bool) -> list[str]:
    return schema.create_statements(table) if forwards else schema.drop_statements(table)


def _verbatim(fragment: Fragment) -> str:
    """``fragment`` with its parameters written in: a migration sends released SQL as it
    is (``params=None``). Integers only, which need no quoting."""
    sql, params = fragment
    if not all(type(value) is int for value in params):
        raise ValueError(f"only integers are written into released SQL: {params!r}")
    return sql % tuple(params)


def _seeded_buckets(schema: SchemaSql, table: Table, forwards: bool) -> list[str]:
    """The bucket leases' table and its row per bucket (the relays' own seed, so it stays
    idempotent: only the rows missing are written)."""
    if not forwards:
        return schema.drop_statements(table)
    return [*schema.create_statements(table), _verbatim(BucketLeaseSql(schema.ops).seed())]


def _no_claimed_rows(schema: SchemaSql, table: Table, forwards: bool) -> list[str]:
    return schema.claimed_status_statements(table, forwards=forwards)


@dataclass(frozen=True)
class Step:
    """One table's part of a release: what it does, and how the live schema code
    rendered its statements (forwards, or backwards) when the release was frozen."""

    description: str
    render: Callable[[SchemaSql, Table, bool], list[str]] = _create_or_drop


#: Every release's DDL, oldest first, by table. A release that changes the schema is
#: added here and frozen with ``scripts/freeze_released_ddl.py``; a released entry and
#: its files are never edited (see docs/development.md, "Changing the schema").
RELEASES: dict[str, dict[TableKind, Step]] = {
    "0.1.0": {
        "outbox": Step("the outbox table and its indexes"),
        "inbox": Step("the inbox table and its index"),
        "relays": Step("the relay registry beside the outbox"),
        "task_results": Step("the Django tasks' results table beside the outbox"),
    },
    # The one-write relay (docs/design/one-write.md): it holds buckets, not rows, and
    # journals its batches in flight; a 0.1.0 relay's claims are refused.
    "0.2.0": {
        "buckets": Step("the bucket leases beside the outbox, one row per bucket",
                        _seeded_buckets),
        "in_flight": Step("the batches in flight beside the outbox"),
        "outbox": Step("rows a 0.1.0 relay left claimed handed back, and status 1 refused "
                       "from then on", _no_claimed_rows),
    },
}


def table_name(kind: TableKind = "outbox", *, schema: str | None = None,
               table: str | None = None) -> TableName:
    """The ``kind`` table's validated name; arguments left as None come from
    ``EVENTFERRY``."""
    settings = get_settings()
    schema = schema if schema is not None else settings.schema
    if kind != "inbox":  # the tables beside the outbox follow its name
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
    migration runs, and for freezing a new release's); ``table`` names that table
    (for the tables beside the outbox: their outbox), and arguments left as None come
    from ``EVENTFERRY``."""
    settings = get_settings()
    outbox = table_name(schema=schema, table=table if kind != "inbox" else None)
    dialect = dialect_for(
        vendor, outbox, native_json=settings.native_json if native_json is None else native_json,
    )
    tables = dialect.schema
    if kind == "inbox":
        return dialect, tables.inbox(table_name("inbox", schema=schema, table=table))
    beside = {"outbox": tables.outbox, "relays": tables.registry,
              "task_results": tables.task_results, "buckets": tables.bucket_leases,
              "in_flight": tables.in_flight}
    return dialect, beside[kind]


def step(release: str, kind: TableKind) -> Step:
    """The part of ``release`` that concerns the ``kind`` table; a clear error where
    there is none."""
    if release not in RELEASES:
        raise ValueError(f"eventferry-django has no release {release!r} with DDL; "
                         f"the releases are {', '.join(RELEASES)}.")
    if kind not in RELEASES[release]:
        raise ValueError(f"Release {release} has no DDL for the {kind} table.")
    return RELEASES[release][kind]


def released(
    release: str, kind: TableKind, vendor: str, *, forwards: bool = True,
    schema: str | None = None, table: str | None = None, native_json: bool | None = None,
) -> list[str]:
    """What ``release`` runs for the ``kind`` table on ``vendor``, forwards or backwards,
    for the table the settings (or ``schema``/``table``) name."""
    step(release, kind)
    name = table_name(kind, schema=schema, table=table)
    if native_json is None:
        native_json = get_settings().native_json
    return released_statements(release, kind, vendor, name, forwards=forwards,
                               native_json=native_json)


def releases_of(kind: TableKind) -> list[str]:
    """The releases with DDL for the ``kind`` table, oldest first."""
    return [release for release, steps in RELEASES.items() if kind in steps]


def create_statements(vendor: str, kind: TableKind = "outbox") -> list[str]:
    """What migrating from scratch runs for the ``kind`` table on ``vendor``: every
    release's statements for it, oldest first."""
    return [statement for release in releases_of(kind)
            for statement in released(release, kind, vendor)]


def drop_statements(vendor: str, kind: TableKind = "outbox") -> list[str]:
    """What migrating back to zero runs for it: every release reversed, newest first."""
    return [statement for release in reversed(releases_of(kind))
            for statement in released(release, kind, vendor, forwards=False)]


def freeze(release: str, kind: TableKind, vendor: str, *, native_json: bool = False) -> str:
    """The template file of ``release``'s DDL for the ``kind`` table on ``vendor``,
    rendered by today's live code: run once, when the release is frozen
    (``scripts/freeze_released_ddl.py``)."""
    part = step(release, kind)
    dialect, table = table_ddl(vendor, kind, schema=SENTINEL_SCHEMA, table=SENTINEL_TABLE,
                               native_json=native_json)
    header = (f"Release {release} on {vendor}{' with NATIVE_JSON' if native_json else ''}:"
              f" {part.description}.\nReleased DDL: never edit this file (see "
              "eventferry_django/released_ddl.py).")
    return template(header, part.render(dialect.schema, table, True),
                    part.render(dialect.schema, table, False))
