"""The relay's settlement of the rows of a batch: ack, fail and bury. A part of the
vendor's dialect (``dialect.settlement``); the vendor's spelling comes from the dialect's
hooks (its clock, id lists, bound times).

No statement here decides whose rows they are: the journal of batches in flight does
that first, in the same transaction (:meth:`.InFlightJournal.settled`), and hands the
settlement only the rows still the relay's. What each statement adds is that it changes
a row once: an ack touches only open rows (pending or failed), and a failure or burial
only a row whose ``attempts`` are still those it was claimed with. So a settlement run
again after a database outage (see ``relay/recent_settlements.py``), or by a relay that
woke up after its batch was swept, changes nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..contract import DEAD, DONE, FAILED, PENDING
from .ops import SqlOps
from .sql import Fragment, compose, param

#: A refused row to settle, led by its id and the attempts it was claimed with.
RowT = TypeVar("RowT", bound=tuple[Any, ...])

#: Rows one ``fail`` or ``bury`` statement settles. Each row binds seven values (its id
#: in the id list and in three ``CASE`` s, and their three values), which keeps a
#: statement under SQLite's smallest limit of 999 bound values (before 3.32) and SQL
#: Server's 2,100.
ROWS_PER_STATEMENT = 120


class SettlementSql:
    """The statements that settle the rows of a batch of one outbox (the dialect's)."""

    def __init__(self, ops: SqlOps) -> None:
        self.ops = ops

    def open_condition(self, ids: Sequence[int]) -> Fragment:
        """Rows ``ids`` still open: not settled already (by this settlement's earlier
        run, or by another relay that took them over and delivered them)."""
        condition, params = self.ops.ids_condition(ids)
        return f"{condition} AND {self.ops.quote('status')} IN ({PENDING}, {FAILED})", params

    def ack(self, cursor: Any, ids: Sequence[int]) -> None:
        """Mark delivered rows done in one statement: the one write of an event's
        normal path."""
        condition, params = self.open_condition(ids)
        q = self.ops.quote
        self.ops.execute_often(
            cursor,
            f"UPDATE {self.ops.table} SET {q('status')} = {DONE}, "
            f"{q('processed_at')} = {self.ops.now_sql} WHERE {condition}",
            params,
        )

    def fail(self, cursor: Any, failures: Sequence[tuple[int, int, int, str]]) -> None:
        """``failures`` are (id, attempts claimed with, retry delay in ms, error): status
        failed, one more attempt, retry time computed by the database clock."""
        q, ops = self.ops.quote, self.ops

        def assignments(rows: Sequence[tuple[int, int, int, str]]) -> Fragment:
            return compose(
                f"{q('attempts')} = {q('attempts')} + 1, {q('status')} = {FAILED}, {{}}, {{}}",
                self.per_row("next_retry_at", [
                    (row_id, ops.now_plus(ops.offset_param(delay_ms)))
                    for row_id, _, delay_ms, _ in rows]),
                self.per_row("last_error", [(row_id, param(error))
                                            for row_id, _, _, error in rows]),
            )

        self.settle_rows(cursor, failures, assignments)

    def bury(self, cursor: Any, burials: Sequence[tuple[int, int, str, bool]]) -> None:
        """``burials`` are (id, attempts claimed with, error, counts_attempt): status
        dead, never claimed again."""
        q, ops = self.ops.quote, self.ops

        def assignments(rows: Sequence[tuple[int, int, str, bool]]) -> Fragment:
            return compose(
                f"{q('attempts')} = {q('attempts')} + ({{}}), {q('status')} = {DEAD}, "
                f"{q('processed_at')} = {ops.now_sql}, {q('next_retry_at')} = NULL, {{}}",
                self.case_by_id([(row_id, param(1 if counts else 0))
                                 for row_id, _, _, counts in rows]),
                self.per_row("last_error", [(row_id, param(error))
                                            for row_id, _, error, _ in rows]),
            )

        self.settle_rows(cursor, burials, assignments)

    def settle_rows(self, cursor: Any, rows: Sequence[RowT],
                    assignments: Callable[[Sequence[RowT]], Fragment]) -> None:
        """Settle ``rows`` (each led by its id and the attempts it was claimed with) with
        the SET list ``assignments`` builds for them, one statement per
        :data:`ROWS_PER_STATEMENT` rows, each row only while its attempts are those."""
        for start in range(0, len(rows), ROWS_PER_STATEMENT):
            chunk = rows[start:start + ROWS_PER_STATEMENT]
            cursor.execute(*compose(
                f"UPDATE {self.ops.table} SET {{}} WHERE {{}} "
                f"AND {self.ops.quote('attempts')} = {{}}", assignments(chunk),
                self.open_condition([row[0] for row in chunk]),
                self.case_by_id([(row[0], param(row[1])) for row in chunk])))

    def case_by_id(self, values: Sequence[tuple[int, Fragment]]) -> Fragment:
        """Each row's own value: ``CASE id WHEN <id> THEN <value> ... END`` (plain SQL, the
        same on every vendor)."""
        branches = [compose("WHEN {} THEN {}", param(row_id), value) for row_id, value in values]
        return compose(f"CASE {self.ops.quote('id')} {' '.join(['{}'] * len(branches))} END",
                       *branches)

    def per_row(self, column: str, values: Sequence[tuple[int, Fragment]]) -> Fragment:
        """``column`` set to each row's own value (:meth:`case_by_id`)."""
        return compose(f"{self.ops.quote(column)} = {{}}", self.case_by_id(values))
