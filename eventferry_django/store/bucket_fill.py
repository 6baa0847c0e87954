"""Rows written without a bucket get theirs.

``publish_event()`` writes each row's bucket. Rows written by a writer that leaves it out
(raw SQL, or a development build before 0.1.0 during a rolling upgrade) have none: they are
anyone's, so the first relay to claim such an aggregate keeps it (it settles a batch and
claims the next in one transaction) and the others cannot share it out. Relays with a
share of the buckets therefore give such rows their bucket, computed in Python as
``publish_event()`` computes it (:func:`~eventferry_django.contract.bucket_of`), the
same on every vendor.

Each fill reads the oldest fresh rows without a bucket (the bucket index's NULL range: one
seek, which finds nothing once there are none) and, for each aggregate among them, sets
the bucket of all the aggregate's fresh rows in one UPDATE, through the open-rows index:
one statement an aggregate, however deep its backlog. Only fresh rows: a claimed row is
about to be settled, and a retry is anyone's anyway. Each UPDATE locks the aggregate's
rows in id order, as a claim does, so the two (or two relays' fills) wait for each other
rather than deadlock, and a fill that waited finds the rows filled and changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .sql import Fragment, compose, param
from .tables import OPEN_STATUSES_SQL

if TYPE_CHECKING:
    from .claim import ClaimSql

#: The fresh rows without a bucket that one fill reads.
FILL_WINDOW = 1000


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

    def fill_sql(self, aggregate: str, bucket: int) -> Fragment:
        """``aggregate``'s fresh rows without a bucket get ``bucket``. The open statuses
        are the open-rows index's own condition, named so that every planner takes it."""
        q = self.ops.quote
        return compose(
            f"UPDATE {self.ops.table} SET {q('bucket')} = {{}} "
            f"WHERE {q('aggregate_id')} = {{}} AND {q('status')} IN {OPEN_STATUSES_SQL} "
            f"AND {{}} AND {q('bucket')} IS NULL",
            param(bucket), param(aggregate), self.claim.fresh_sql(""))
