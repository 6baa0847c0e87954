"""Deleting old rows in bounded batches: the outbox's purge of closed rows, and the
statement the inbox's purge runs on too. A part of the vendor's dialect
(``dialect.purge``); each vendor module subclasses it where its spelling differs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..contract import MAX_BATCH
from .ops import SqlOps


class PurgeSql:
    """Batch deletes on one vendor, for the outbox (the dialect's) and any other table."""

    #: How a batch delete's id subquery ends: its limit, and a lock where there are row
    #: locks.
    purge_subquery_tail: ClassVar[str] = "LIMIT %s"
    #: The most rows one purge statement deletes, whatever batch size is asked for.
    max_delete_batch: ClassVar[int] = MAX_BATCH

    def __init__(self, ops: SqlOps) -> None:
        self.ops = ops

    def delete_batch(
        self, cursor: Any, table: str, condition: str, params: Sequence[Any], limit: int,
        order: Sequence[str] = ("id",),
    ) -> int:
        """Delete up to ``limit`` rows of ``table`` (quoted) that match ``condition`` (SQL
        whose placeholders ``params`` fill); the purges of both tables run on this.
        ``order`` is the order of the index that serves ``condition``, for a vendor whose
        DELETE takes its own ORDER BY (MariaDB/MySQL); the others pick rows by id."""
        q = self.ops.quote
        cursor.execute(
            f"DELETE FROM {table} WHERE {q('id')} IN (SELECT {q('id')} FROM {table} "
            f"WHERE {condition} {self.purge_subquery_tail})",
            [*params, limit],
        )
        return int(cursor.rowcount)

    def purge_batch(
        self, cursor: Any, statuses: Sequence[int], cutoff: Any, limit: int
    ) -> int:
        """Delete up to ``limit`` rows in ``statuses`` processed before ``cutoff``, in the
        order of the retention index (status, processed_at), whose entries end with the
        primary key: ordered by id alone, MariaDB sorted every old row for each batch
        (1,200 rows/s for a 300,000-row backlog of done rows, benchmarks/scale.py)."""
        return self.delete_batch(cursor, self.ops.table, self.purge_condition(statuses), [cutoff],
                                 limit, order=("status", "processed_at", "id"))

    def purge_condition(self, statuses: Sequence[int]) -> str:
        """Closed rows older than the bound cutoff; statuses are ints, never user text."""
        q = self.ops.quote
        codes = ", ".join(str(int(s)) for s in statuses)
        return (f"{q('status')} IN ({codes}) "
                f"AND {q('processed_at')} < {self.ops.timestamp_placeholder}")
