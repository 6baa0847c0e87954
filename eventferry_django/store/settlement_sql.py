"""The relay's settlement of claimed rows: ack, fail, bury, renew and release, each
fenced by the lease the rows were claimed under. A part of the vendor's dialect
(``dialect.settlement``); the vendor's spelling comes from the dialect's hooks (its
clock, id lists, bound times, locking clause), so a vendor subclasses this only for
:attr:`SettlementSql.renew_hint`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from ..contract import CLAIMED, DEAD, DONE, FAILED, PENDING
from .ops import SqlOps


class SettlementSql:
    """The statements that settle claimed rows of one outbox (the dialect's)."""

    #: Table hint of the renewal's UPDATE (SQL Server, which has no SKIP LOCKED).
    renew_hint: ClassVar[str] = ""

    def __init__(self, ops: SqlOps) -> None:
        self.ops = ops

    def settle_condition(self, ids: Sequence[int], lease: Any) -> tuple[str, list[Any]]:
        """Rows still held under ``lease``: the fence that stops a relay whose lease was
        taken back from touching rows another relay now holds."""
        condition, params = self.ops.ids_condition(ids)
        q = self.ops.quote
        held = f"{q('status')} = {CLAIMED} AND {q('claimed_at')} = {self.ops.timestamp_placeholder}"
        return f"{condition} AND {held}", [*params, lease]

    def ack(self, cursor: Any, ids: Sequence[int], lease: Any) -> int:
        """Mark delivered rows done in one statement; returns how many were still held."""
        condition, params = self.settle_condition(ids, lease)
        q = self.ops.quote
        done = self.ops.execute_often(
            cursor,
            f"UPDATE {self.ops.table} SET {q('status')} = {DONE}, "
            f"{q('processed_at')} = {self.ops.now_sql} WHERE {condition}",
            params,
        )
        return int(done.rowcount)

    def fail(self, cursor: Any, failures: Sequence[tuple[int, int, str]], lease: Any) -> int:
        """``failures`` are (id, retry delay in ms, error): status failed, one more attempt,
        retry time computed by the database clock."""
        q = self.ops.quote
        total = 0
        for row_id, delay_ms, error in failures:
            condition, params = self.settle_condition([row_id], lease)
            cursor.execute(
                f"UPDATE {self.ops.table} SET {q('attempts')} = {q('attempts')} + 1, "
                f"{q('status')} = {FAILED}, {q('next_retry_at')} = {self.ops.now_plus_sql()}, "
                f"{q('last_error')} = %s WHERE {condition}",
                [self.ops.offset_param(delay_ms), error, *params],
            )
            total += cursor.rowcount
        return total

    def bury(self, cursor: Any, burials: Sequence[tuple[int, str, bool]], lease: Any) -> int:
        """``burials`` are (id, error, counts_attempt): status dead, never claimed again."""
        q = self.ops.quote
        total = 0
        for row_id, error, counts_attempt in burials:
            condition, params = self.settle_condition([row_id], lease)
            cursor.execute(
                f"UPDATE {self.ops.table} SET {q('attempts')} = {q('attempts')} + %s, "
                f"{q('status')} = {DEAD}, {q('processed_at')} = {self.ops.now_sql}, "
                f"{q('next_retry_at')} = NULL, {q('last_error')} = %s WHERE {condition}",
                [1 if counts_attempt else 0, error, *params],
            )
            total += cursor.rowcount
        return total

    def renew(self, cursor: Any, ids: Sequence[int], lease: Any, lease_timeout_ms: int) -> int:
        """Extend the lease of the rows still held under ``lease`` to ``lease_timeout_ms``
        from now; returns how many were renewed. The lease token (``claimed_at``) stays
        as it is, so a settlement running at the same time still matches it.

        A row locked by anyone (this relay's own settlement, a DBA's transaction) is
        skipped, never waited for: no other relay can take a locked row back either, and
        a renewal stuck behind one lock would let every other row's lease run out."""
        condition, params = self.settle_condition(ids, lease)
        q = self.ops.quote
        if self.ops.skip_locked_sql:
            cursor.execute(f"SELECT c.{q('id')} FROM {self.ops.table} AS c "
                           f"WHERE {condition}{self.ops.skip_locked_sql}", params)
            unlocked = [row[0] for row in cursor.fetchall()]
            if not unlocked:
                return 0
            condition, params = self.settle_condition(unlocked, lease)
        cursor.execute(
            f"UPDATE {self.ops.table}{self.renew_hint} SET {q('next_retry_at')} = "
            f"{self.ops.now_plus_sql()} WHERE {condition}",
            [self.ops.offset_param(lease_timeout_ms), *params],
        )
        return int(cursor.rowcount)

    def release(self, cursor: Any, ids: Sequence[int], lease: Any) -> int:
        """Hand rows back untouched (the broker was down): pending again, no attempt spent."""
        condition, params = self.settle_condition(ids, lease)
        q = self.ops.quote
        cursor.execute(
            f"UPDATE {self.ops.table} SET {q('status')} = {PENDING}, {q('claimed_at')} = NULL, "
            f"{q('next_retry_at')} = NULL "
            f"WHERE {condition}",
            params,
        )
        return int(cursor.rowcount)
