"""The relay's settlement of claimed rows: ack, fail, bury, renew and release, each
fenced by the lease the rows were claimed under. A part of the vendor's dialect
(``dialect.settlement``); the vendor's spelling comes from the dialect's hooks (its
clock, id lists, bound times, locking clause), so a vendor subclasses this only for
:attr:`SettlementSql.renew_hint`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

from ..contract import CLAIMED, DEAD, DONE, FAILED, PENDING
from .ops import SqlOps
from .sql import Fragment, compose, param

#: A refused row to settle, led by its id.
RowT = TypeVar("RowT", bound=tuple[Any, ...])

#: Rows one ``fail`` or ``bury`` statement settles. Each row binds five values (its id
#: in the id list and in two ``CASE`` s, and their two values), which keeps a statement
#: under SQLite's smallest limit of 999 bound values (before 3.32) and SQL Server's 2,100.
ROWS_PER_STATEMENT = 150


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
        q, ops = self.ops.quote, self.ops

        def assignments(rows: Sequence[tuple[int, int, str]]) -> Fragment:
            return compose(
                f"{q('attempts')} = {q('attempts')} + 1, {q('status')} = {FAILED}, {{}}, {{}}",
                self.per_row("next_retry_at", [
                    (row_id, ops.now_plus(ops.offset_param(delay_ms)))
                    for row_id, delay_ms, _ in rows]),
                self.per_row("last_error", [(row_id, param(error)) for row_id, _, error in rows]),
            )

        return self.settle_rows(cursor, failures, lease, assignments)

    def bury(self, cursor: Any, burials: Sequence[tuple[int, str, bool]], lease: Any) -> int:
        """``burials`` are (id, error, counts_attempt): status dead, never claimed again."""
        q, ops = self.ops.quote, self.ops

        def assignments(rows: Sequence[tuple[int, str, bool]]) -> Fragment:
            return compose(
                f"{q('attempts')} = {q('attempts')} + ({{}}), {q('status')} = {DEAD}, "
                f"{q('processed_at')} = {ops.now_sql}, {q('next_retry_at')} = NULL, {{}}",
                self.case_by_id([(row_id, param(1 if counts else 0))
                                 for row_id, _, counts in rows]),
                self.per_row("last_error", [(row_id, param(error)) for row_id, error, _ in rows]),
            )

        return self.settle_rows(cursor, burials, lease, assignments)

    def settle_rows(self, cursor: Any, rows: Sequence[RowT], lease: Any,
                    assignments: Callable[[Sequence[RowT]], Fragment]) -> int:
        """Settle ``rows`` (each led by its id) with the SET list ``assignments`` builds
        for them, one statement per :data:`ROWS_PER_STATEMENT` rows; returns how many
        were still held."""
        total = 0
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            chunk = rows[start:start + ROWS_PER_STATEMENT]
            sql, params = compose(
                f"UPDATE {self.ops.table} SET {{}} WHERE {{}}", assignments(chunk),
                self.settle_condition([row[0] for row in chunk], lease))
            cursor.execute(sql, params)
            total += cursor.rowcount
        return total

    def case_by_id(self, values: Sequence[tuple[int, Fragment]]) -> Fragment:
        """Each row's own value: ``CASE id WHEN <id> THEN <value> ... END`` (plain SQL, the
        same on every vendor)."""
        branches = [compose("WHEN {} THEN {}", param(row_id), value) for row_id, value in values]
        return compose(f"CASE {self.ops.quote('id')} {' '.join(['{}'] * len(branches))} END",
                       *branches)

    def per_row(self, column: str, values: Sequence[tuple[int, Fragment]]) -> Fragment:
        """``column`` set to each row's own value (:meth:`case_by_id`)."""
        return compose(f"{self.ops.quote(column)} = {{}}", self.case_by_id(values))

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
