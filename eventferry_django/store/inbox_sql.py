"""The consumers' inbox's SQL: recording a handled message once, and purging old
records. A part of the vendor's dialect (``dialect.inbox``); each vendor module
subclasses it where its spelling differs. The inbox's DDL is the schema part's."""

from __future__ import annotations

from typing import Any, TypeVar

from .ops import SqlOps
from .purge import PurgeSql
from .schema import SchemaSql
from .tables import INBOX_KEY, Table

T = TypeVar("T")




class InboxSql:
    """The inbox's DML on one vendor, for any inbox :class:`~.tables.Table`."""

    def __init__(self, ops: SqlOps, schema: SchemaSql, purge: PurgeSql) -> None:
        self.ops = ops
        self.qualified = schema.qualified
        self.delete_batch = purge.delete_batch

    def record_message(self, cursor: Any, table: Table, consumer: str, message_id: str) -> bool:
        """Insert the inbox row of (``consumer``, ``message_id``) unless it exists; True
        when this call inserted it.

        An uncommitted row of another transaction with the same key makes this wait for
        that transaction: if it commits, nothing is inserted (False); if it rolls back,
        this inserts. So two deliveries of one message never both get True.
        """
        sql = self.ops.statement(("record", table.name), lambda: self.record_message_sql(table))
        cursor.execute(sql, self.record_message_params(consumer, message_id))
        return int(cursor.rowcount) == 1

    def record_message_sql(self, table: Table) -> str:
        """Placeholders: those of :meth:`record_message_params`."""
        key = self.ops.columns(INBOX_KEY)
        return (f"INSERT INTO {self.qualified(table)} ({key}) VALUES (%s, %s) "
                f"ON CONFLICT ({key}) DO NOTHING")

    def record_message_params(self, consumer: str, message_id: str) -> list[Any]:
        return [consumer, message_id]

    def inbox_purge_batch(
        self, cursor: Any, table: Table, cutoff: Any, consumer: str | None, limit: int
    ) -> int:
        """Delete up to ``limit`` inbox rows handled before ``cutoff`` (of ``consumer``
        only, unless None)."""
        q = self.ops.quote
        condition = f"{q('handled_at')} < {self.ops.timestamp_placeholder}"
        params = [cutoff]
        if consumer is not None:
            condition += f" AND {q('consumer')} = %s"
            params.append(consumer)
        return self.delete_batch(cursor, self.qualified(table), condition, params, limit)
