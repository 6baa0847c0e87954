"""The DDL of eventferry's tables (the outbox, the inbox) for a connection or a named
vendor, from the settings.

The migrations and ``manage.py outbox_sql`` both print from here, so what a DBA reviews
is byte for byte what ``migrate`` runs.
"""

from __future__ import annotations

from typing import Literal

from .conf import get_settings
from .naming import TableName
from .store import Dialect, dialect_for
from .store.tables import Table

#: eventferry's tables, as the migrations and ``outbox_sql`` name them.
TableKind = Literal["outbox", "inbox", "relays"]


def table_ddl(
    vendor: str,
    kind: TableKind = "outbox",
    *,
    schema: str | None = None,
    table: str | None = None,
    native_json: bool | None = None,
) -> tuple[Dialect, Table]:
    """The dialect for ``vendor`` and the ``kind`` table it renders; ``table`` names that
    table (for the relay registry: its outbox), and arguments left as None come from
    ``EVENTFERRY``."""
    settings = get_settings()
    schema = schema if schema is not None else settings.schema
    # The registry's name follows its outbox's, which ``table`` then names.
    outbox = table if table is not None and kind != "inbox" else settings.table
    dialect = dialect_for(
        vendor, TableName(outbox, schema),
        native_json=settings.native_json if native_json is None else native_json,
    )
    if kind == "outbox":
        return dialect, dialect.schema.outbox
    if kind == "relays":
        return dialect, dialect.schema.registry
    inbox = table if table is not None else settings.inbox_table
    return dialect, dialect.schema.inbox(TableName(inbox, schema, role="Inbox"))


def create_statements(vendor: str, kind: TableKind = "outbox") -> list[str]:
    """What the migration of the ``kind`` table runs forwards on ``vendor``."""
    dialect, table = table_ddl(vendor, kind)
    return dialect.schema.create_statements(table)


def drop_statements(vendor: str, kind: TableKind = "outbox") -> list[str]:
    """What it runs backwards."""
    dialect, table = table_ddl(vendor, kind)
    return dialect.schema.drop_statements(table)


def open_rows_index_statements(vendor: str, *, forwards: bool = True) -> list[str]:
    """What migration 0005 runs on ``vendor``: the open-rows index in, the first
    release's head-of-aggregate index out (the other way round backwards)."""
    dialect, _ = table_ddl(vendor)
    return dialect.schema.open_rows_index_statements(forwards=forwards)


def autovacuum_statements(vendor: str, *, forwards: bool = True) -> list[str]:
    """What migration 0006 runs on ``vendor``: the outbox's autovacuum tuning (PostgreSQL
    only; nothing elsewhere), or back to the server's defaults backwards."""
    dialect, _ = table_ddl(vendor)
    return dialect.schema.autovacuum_statements(forwards=forwards)


def closed_rows_index_statements(vendor: str, *, forwards: bool = True) -> list[str]:
    """What migration 0007 runs on ``vendor``: the retention index filtered on the closed
    statuses in, the unfiltered one out (the other way round backwards); nothing on
    MariaDB/MySQL, which have no filtered indexes."""
    dialect, _ = table_ddl(vendor)
    return dialect.schema.closed_rows_index_statements(forwards=forwards)
