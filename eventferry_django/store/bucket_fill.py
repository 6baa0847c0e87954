"""Rows written without a bucket get theirs.

``publish_event()`` writes each row's bucket. Rows written by a writer that leaves it out
(raw SQL, or a development build before 0.1.0 during a rolling upgrade) have none: they are
anyone's, so the first relay to claim such an aggregate keeps it (it settles a batch and
claims the next in one transaction) and the others cannot share it out. Relays with a
share of the buckets therefore give such rows their bucket, computed in Python as
``publish_event()`` computes it (:func:`~eventferry_django.contract.bucket_of`), the
same on every vendor.

Each fill reads the oldest fresh rows without a bucket (the bucket index's NULL range: one
seek, which finds nothing once there are none) and sets the bucket of all fresh rows of
the aggregates among them, :data:`AGGREGATES_PER_FILL` aggregates to an UPDATE that
seeks each through the open-rows index, however deep its backlog, and commits on its
own. Until a fill ends, the rows it has not reached are anyone's, so it must be quick: a
statement an aggregate took 1.4 s for 1,000 aggregates on MariaDB, time enough for the
relay that started first to claim the chains of a share of the other's aggregates (a
sharing test's 2:1 split). Only fresh rows: a claimed row is about to be settled, and a
retry is anyone's anyway. Each UPDATE locks its aggregates' rows, as a claim does, so a
claim skips them and two relays' fills wait for each other; a fill that waited finds
the rows filled and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .sql import Fragment, compose, param
from .tables import OPEN_STATUSES_SQL

if TYPE_CHECKING:
    from .claim import ClaimSql

#: The fresh rows without a bucket that one fill reads.
FILL_WINDOW = 1000
#: Aggregates one UPDATE of a fill gives their bucket. Each binds three values (its
#: bucket's ``WHEN``, ``THEN`` and its place in the ``IN`` list): 300 a statement, under
#: SQLite's smallest limit of 999 bound values (before 3.32) and SQL Server's 2,100.
AGGREGATES_PER_FILL = 100


class BucketFillSql:
    """One vendor's fill, written with its claim's window and predicates; the store
    runs it (:meth:`~eventferry_django.store.outbox.OutboxStore.fill_buckets`), each
    UPDATE in a transaction of its own, so no aggregate stays locked while others are
    filled."""

    def __init__(self, claim: ClaimSql) -> None:
        self.claim = claim
        self.ops = claim.ops

    def unbucketed_sql(self) -> Fragment:
        """Ids and aggregates of the oldest :data:`FILL_WINDOW` fresh rows without a
        bucket."""
        return self.claim.window_sql(("IS NULL", []), param(FILL_WINDOW))

    def fill_sql(self, buckets: Sequence[tuple[str, int]]) -> Fragment:
        """The fresh rows without a bucket of each (aggregate, bucket) of ``buckets``
        (at most :data:`AGGREGATES_PER_FILL`) get that bucket. The open statuses are the
        open-rows index's own condition, named so that every planner takes it."""
        if not 0 < len(buckets) <= AGGREGATES_PER_FILL:
            raise ValueError(f"a fill statement takes 1 to {AGGREGATES_PER_FILL} "
                             f"aggregates, got {len(buckets)}")
        q = self.ops.quote
        cases = [compose("WHEN {} THEN {}", param(aggregate), param(bucket))
                 for aggregate, bucket in buckets]
        aggregates: Fragment = (", ".join(["%s"] * len(buckets)),
                                [aggregate for aggregate, _ in buckets])
        return compose(
            f"UPDATE {self.ops.table} SET {q('bucket')} = CASE {q('aggregate_id')} "
            f"{' '.join(['{}'] * len(cases))} END "
            f"WHERE {q('aggregate_id')} IN ({{}}) AND {q('status')} IN {OPEN_STATUSES_SQL} "
            f"AND {{}} AND {q('bucket')} IS NULL",
            *cases, aggregates, self.claim.fresh_sql(""))
