"""The oldest row a relay could claim right now, read with the claim's own predicates.

``eventferry_oldest_claimable_age_seconds`` is how long that row has been waiting: since
it was written (a fresh row) or since its time came (a scheduled row, a retry). A row
that waits for its time, or behind an earlier open row of its aggregate, cannot be
claimed and is not counted, so a scheduled event, a retry backing off and the aggregates
they hold back never raise the age; a relay that keeps up keeps it near zero.

Each kind is one probe that stops at its first row: the claim's candidate scan with a
limit of one (fresh rows, in the claim index's order), or a seek into the claim index
``(status, next_retry_at, id)`` at one status, its rows already in due-time order (rows
whose time has come). Rows scheduled ahead lie past the end of that range, so the probes
never read them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..contract import FAILED, PENDING
from .sql import Fragment, compose

if TYPE_CHECKING:
    from .claim import ClaimSql

#: What each probe reads: the row's id and the columns its waiting time starts from.
PROBE_COLUMNS: dict[str, tuple[str, ...]] = {
    "fresh": ("id", "created_at"),
    "scheduled": ("id", "next_retry_at"),
    "retry": ("id", "next_retry_at"),
}


class ClaimableSql:
    """The probes of one vendor, written with its claim's predicates; each a
    :data:`~.sql.Fragment`."""

    def __init__(self, claim: ClaimSql) -> None:
        self.claim = claim
        self.ops = claim.ops

    def probes(self) -> dict[str, Fragment]:
        """One probe per kind of :data:`PROBE_COLUMNS`, selecting those columns."""
        ops = self.ops
        q = ops.quote
        status, retry_at = f"c.{q('status')}", f"c.{q('next_retry_at')}"
        due = f"{retry_at} <= {ops.now_sql}"
        in_index_order = f"{status}, {retry_at}, c.{q('id')}"
        return {
            "fresh": self._first("fresh", self.claim.fresh_sql("c"), in_index_order),
            "scheduled": self._first("scheduled", (f"{status} = {PENDING} AND {due}", []),
                                     in_index_order),
            "retry": self._first("retry", (f"{status} = {FAILED} AND {due}", []),
                                 in_index_order),
        }

    def _first(self, kind: str, condition: Fragment, order: str) -> Fragment:
        ops = self.ops
        columns = ", ".join(f"c.{ops.quote(c)}" for c in PROBE_COLUMNS[kind])
        top, limit = ops.first_row
        return compose(
            f"SELECT {top}{columns} FROM {ops.table} AS c WHERE {{}} AND {{}} "
            f"ORDER BY {order}{limit}",
            condition, self.claim.head_of_aggregate_sql("c"),
        )
