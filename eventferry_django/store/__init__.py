"""Vendor SQL for the outbox table. One module per vendor holds all of that vendor's SQL."""

from __future__ import annotations

from ..exceptions import UnsupportedDatabase
from ..naming import TableName
from .base import Dialect
from .microsoft import MicrosoftDialect
from .mysql import MysqlDialect
from .postgresql import PostgresqlDialect
from .sqlite import SqliteDialect

DIALECTS: dict[str, type[Dialect]] = {
    dialect.vendor: dialect
    for dialect in (MicrosoftDialect, PostgresqlDialect, MysqlDialect, SqliteDialect)
}

VENDORS = tuple(DIALECTS)


def dialect_for(vendor: str, name: TableName, *, native_json: bool = False) -> Dialect:
    """The dialect of ``vendor`` (a Django ``connection.vendor``) for table ``name``."""
    try:
        dialect_class = DIALECTS[vendor]
    except KeyError:
        raise UnsupportedDatabase(
            f"eventferry has no store for the {vendor!r} database backend; supported: "
            f"{', '.join(VENDORS)} (SQL Server through mssql-django)."
        ) from None
    return dialect_class(name, native_json=native_json)


__all__ = ["DIALECTS", "VENDORS", "Dialect", "dialect_for"]
