"""SQLite (3.35+, with the JSON functions): all of its SQL.

SQLite has no schemas and no INCLUDE; partial indexes exist. ``AUTOINCREMENT`` keeps ids
monotonic even after the newest rows are purged, which archives and replays rely on.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .base import Column, Dialect, Table


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

    def column_definition(self, table: Table, column: Column) -> str:
        definition = super().column_definition(table, column)
        if column.kind == "id":
            # AUTOINCREMENT is only allowed on the column itself.
            definition += (
                f" CONSTRAINT {self.quote(table.name.primary_key)} PRIMARY KEY AUTOINCREMENT"
            )
        return definition

    def primary_key(self, table: Table) -> None:
        return None

    def json_check(self, column: str) -> str:
        return f"json_valid({self.quote(column)})"

    # -- DML ---------------------------------------------------------------------------
    # SQLite has one writer at a time: each claim is a single UPDATE, atomic on its own,
    # so it is correct with several relays, which simply take turns. Run one relay.
    now_sql = "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')"

    def now_plus_sql(self) -> str:
        return "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', %s)"

    def offset_param(self, milliseconds: int) -> Any:
        return f"{milliseconds / 1000:+.3f} seconds"

    def is_transient(self, exc: BaseException) -> bool:
        # Another connection held the write lock longer than the busy timeout.
        return "database is locked" in str(exc)

    def select_column(self, column: str) -> str:
        # RETURNING takes bare column names; the lease stays the exact stored text so it
        # compares equal when it comes back.
        if column == "claimed_at":
            return f"CAST({self.quote(column)} AS TEXT)"
        return self.quote(column)

    def claim(self, cursor: Any, limit: int, lease_timeout_ms: int) -> list[tuple[Any, ...]]:
        q = self.quote
        cursor.execute(self.statement("claim", lambda: (
            f"UPDATE {self.table} AS o SET {self.claim_set_sql('o')} "
            f"WHERE o.{q('id')} IN (SELECT c.{q('id')} FROM {self.table} AS c "
            f"WHERE {self.claimable_sql('c')} ORDER BY c.{q('id')} LIMIT %s) "
            f"RETURNING {self.returned_columns()}"
        )), [self.offset_param(-lease_timeout_ms), limit])
        return sorted(cursor.fetchall(), key=lambda row: row[0])

    purge_subquery_tail = 'ORDER BY "id" LIMIT %s'
