"""SQLite (3.35+, with the JSON functions): all of its SQL.

SQLite has no schemas and no INCLUDE; partial indexes exist. ``AUTOINCREMENT`` keeps ids
monotonic even after the newest rows are purged, which archives and replays rely on.
"""

from __future__ import annotations

from typing import ClassVar

from .base import Column, Dialect


class SqliteDialect(Dialect):
    vendor = "sqlite"
    COLUMN_TYPES: ClassVar[dict[str, str]] = {
        "id": "INTEGER NOT NULL",
        "text64": "VARCHAR(64)",
        "text255": "VARCHAR(255)",
        "text4000": "VARCHAR(4000)",
        "json": "TEXT",
        "tinyint": "SMALLINT",
        "int": "INTEGER",
        "timestamp": "DATETIME",
    }
    DEFAULTS: ClassVar[dict[str, str]] = {
        "empty_json": "'{}'",
        "zero": "0",
        # The text form Django itself stores datetimes in, in UTC.
        "now": "(strftime('%Y-%m-%d %H:%M:%f', 'now'))",
    }

    def column_definition(self, column: Column) -> str:
        definition = super().column_definition(column)
        if column.kind == "id":
            # AUTOINCREMENT is only allowed on the column itself.
            definition += (
                f" CONSTRAINT {self.quote(self.name.primary_key)} PRIMARY KEY AUTOINCREMENT"
            )
        return definition

    def primary_key(self) -> None:
        return None

    def json_check(self, column: str) -> str:
        return f"json_valid({self.quote(column)})"
