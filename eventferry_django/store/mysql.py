"""MariaDB 10.6+ and MySQL 8.0.16+: all of their SQL.

Neither has filtered indexes. The claim index keeps ``status`` as its leading column, so
the claim scan reads only the key ranges of the open statuses (0, 1, 3) and never walks
the done and dead rows: the same cost profile as the filtered index elsewhere, paid for
with index entries for closed rows. INCLUDE columns become trailing key columns.

MySQL has no ``CREATE INDEX IF NOT EXISTS`` (MariaDB has), so each index is guarded by
an ``information_schema`` lookup and a prepared statement, which both accept.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, ClassVar

from ..naming import TableName
from .base import INBOX_KEY, Dialect, Table
from .closed_rows import codes


class MysqlDialect(Dialect):
    vendor = "mysql"
    supports_partial_index = False
    COLUMN_TYPES: ClassVar[dict[str, str]] = {
        "id": "BIGINT NOT NULL AUTO_INCREMENT",
        "text64": "VARCHAR(64)",
        "text255": "VARCHAR(255)",
        "text4000": "VARCHAR(4000)",
        "json": "JSON",
        "tinyint": "TINYINT UNSIGNED",
        "int": "INT",
        "timestamp": "DATETIME(3)",
    }
    DEFAULTS: ClassVar[dict[str, str]] = {
        "empty_json": "('{}')",
        "zero": "0",
        "now": "(UTC_TIMESTAMP(3))",
    }

    def json_check(self, column: str) -> str:
        # MySQL's JSON type validates already; on MariaDB JSON is LONGTEXT and this
        # CHECK is what rejects malformed documents.
        return f"JSON_VALID({self.quote(column)})"

    @staticmethod
    def schema_expression(name: TableName) -> str:
        return f"'{name.schema}'" if name.schema else "DATABASE()"

    def create_statements(self, table: Table | None = None) -> list[str]:
        table = table or self.outbox
        statements = [
            f"CREATE TABLE IF NOT EXISTS {self.qualified(table)} {self.table_body(table)} "
            # Binary collation: message and aggregate ids compare exactly, as elsewhere.
            "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
        ]
        for index in table.indexes:
            create = f"CREATE INDEX {self.index_definition(index, table)}"
            statements += [
                "SET @eventferry_ddl = (SELECT IF(COUNT(*) = 0, "
                f"'{create}', 'DO 0') FROM information_schema.statistics "
                f"WHERE table_schema = {self.schema_expression(table.name)} "
                f"AND table_name = '{table.name.table}' AND index_name = '{index.name}')",
                "PREPARE eventferry_ddl FROM @eventferry_ddl",
                "EXECUTE eventferry_ddl",
                "DEALLOCATE PREPARE eventferry_ddl",
            ]
        return statements

    # -- DML ---------------------------------------------------------------------------
    now_sql = "UTC_TIMESTAMP(3)"
    # MySQL evaluates SET assignments left to right with the new values, so the claim's
    # SET must read the old status first: claim_set_sql() puts attempts before status.
    qualify_set_columns = True
    claim_needs_transaction = True
    skip_locked_sql = " FOR UPDATE SKIP LOCKED"

    def is_transient(self, exc: BaseException) -> bool:
        # 1213: deadlock victim; 1205: lock wait timeout. InnoDB rolls the transaction back.
        return bool(exc.args) and exc.args[0] in (1213, 1205)

    def now_plus_sql(self) -> str:
        return "TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3))"

    def offset_param(self, milliseconds: int) -> Any:
        return milliseconds * 1000

    def claim(self, cursor: Any, limit: int, lease_timeout_ms: int) -> list[tuple[Any, ...]]:
        # No UPDATE ... RETURNING here: lock, update, read back, inside the caller's
        # transaction. A locking clause does not reach into the NOT EXISTS subquery, which
        # reads committed state, so a competitor's locked earlier row still blocks. Fresh
        # rows are read in the claim index's order (id order for them), so the scan stops
        # at the limit; the few overdue rows are found separately.
        q = self.quote
        cursor.execute(self.fresh_candidates_sql(), [limit])
        ids = [row[0] for row in cursor.fetchall()]
        cursor.execute(self.overdue_candidates_sql(),
                       [self.offset_param(-lease_timeout_ms), limit])
        ids = sorted(ids + [row[0] for row in cursor.fetchall()])[:limit]
        if not ids:
            return []
        condition, params = self.ids_condition(ids)
        cursor.execute(
            f"UPDATE {self.table} AS o SET {self.claim_set_sql('o')} WHERE o.{condition}", params
        )
        cursor.execute(
            f"SELECT {self.returned_columns()} FROM {self.table} AS o WHERE o.{condition} "
            f"ORDER BY o.{q('id')}",
            params,
        )
        return list(cursor.fetchall())

    def delete_batch(
        self, cursor: Any, table: str, condition: str, params: Sequence[Any], limit: int
    ) -> int:
        cursor.execute(
            f"DELETE FROM {table} WHERE {condition} ORDER BY {self.quote('id')} LIMIT %s",
            [*params, limit],
        )
        return int(cursor.rowcount)

    # -- history -----------------------------------------------------------------------
    def utc_literal(self, value: dt.datetime) -> str:
        return f"CAST('{self.archived_key_text(value)}' AS DATETIME(3))"

    def timestamp_text_sql(self, column: str) -> str:
        return f"DATE_FORMAT({self.quote(column)}, '%Y-%m-%d %H:%i:%s.%f')"

    def purge_archived_sql(self, statuses: Sequence[int]) -> str:
        q = self.quote
        return (
            f"DELETE o FROM {self.table} AS o JOIN JSON_TABLE(%s, '$[*]' COLUMNS ("
            "id BIGINT PATH '$[0]', processed_at DATETIME(3) PATH '$[1]')) AS a "
            f"ON o.{q('id')} = a.id AND o.{q('processed_at')} = a.processed_at "
            f"WHERE o.{q('status')} IN ({codes(statuses)})"
        )

    def record_message_sql(self, table: Table) -> str:
        # No ON CONFLICT here. IGNORE turns only the duplicate key into "0 rows": the
        # values are validated before they get here, so there is nothing else for it to
        # hide. (ON DUPLICATE KEY UPDATE would report 1 row either way: Django connects
        # with CLIENT_FOUND_ROWS.)
        return (f"INSERT IGNORE INTO {self.qualified(table)} ({self.columns(INBOX_KEY)}) "
                "VALUES (%s, %s)")
