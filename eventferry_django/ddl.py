"""The outbox table's DDL for a connection or a named vendor, from the settings.

The migration and ``manage.py outbox_sql`` both print from here, so what a DBA reviews
is byte for byte what ``migrate`` runs.
"""

from __future__ import annotations

from .conf import get_settings
from .naming import TableName
from .store import Dialect, dialect_for


def outbox_dialect(
    vendor: str,
    *,
    schema: str | None = None,
    table: str | None = None,
    native_json: bool | None = None,
) -> Dialect:
    """The dialect for ``vendor``; arguments left as None come from ``EVENTFERRY``."""
    settings = get_settings()
    name = TableName(
        table if table is not None else settings.table,
        schema if schema is not None else settings.schema,
    )
    return dialect_for(
        vendor, name, native_json=settings.native_json if native_json is None else native_json
    )


def create_statements(vendor: str) -> list[str]:
    """What the migration runs forwards on ``vendor``, for the configured table."""
    return outbox_dialect(vendor).create_statements()


def drop_statements(vendor: str) -> list[str]:
    """What the migration runs backwards."""
    return outbox_dialect(vendor).drop_statements()
