"""Bucket leases: which relay holds each of the outbox's buckets, under which epoch, until
when (the one-write design, docs/design/one-write.md).

A relay takes the buckets its share names with a guarded UPDATE (free, or expired),
which raises each bucket's epoch; renews all it holds in one UPDATE; and releases a
bucket only once its batches in flight from it are settled. Every time is the database's
clock, so relays on machines whose clocks disagree still agree on who holds what.

A relay that lost a bucket cannot settle the rows it claimed from it: the taker takes
them out of its batches in flight (:mod:`.in_flight_journal`), and the epoch says which
batches were claimed before the take.

Every statement is a :data:`~.sql.Fragment`; :class:`BucketLeases` runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from ..contract import BUCKETS
from .bound import BoundStore
from .ops import SqlOps
from .sql import Fragment

#: The digits 0 to 15 as a derived table every vendor reads: the seed crosses two of them.
_HEX_DIGITS = " UNION ALL ".join(f"SELECT {d} AS d" for d in range(16))


class BucketLeaseSql:
    """The bucket leases' statements beside one outbox (the dialect's ``ops``)."""

    def __init__(self, ops: SqlOps) -> None:
        self.ops = ops
        self.table = ops.name.bucket_leases.quoted(ops.vendor)
        q = ops.quote
        self.bucket, self.owner, self.epoch = q("bucket"), q("owner"), q("epoch")
        self.expires_at = q("expires_at")

    def _buckets_in(self, buckets: Collection[int]) -> Fragment:
        if not buckets:
            raise ValueError("a bucket lease statement needs at least one bucket")
        return (f"{self.bucket} IN ({', '.join(['%s'] * len(buckets))})",
                [int(b) for b in sorted(buckets)])

    def _live(self) -> str:
        return f"{self.expires_at} > {self.ops.now_sql}"

    def seed(self) -> Fragment:
        """Insert the rows of the buckets that have none (all of them, the first time):
        idempotent, as the DDL around it is."""
        number = "h.d * 16 + l.d"
        return (f"INSERT INTO {self.table} ({self.bucket}) SELECT {number} "
                f"FROM ({_HEX_DIGITS}) h CROSS JOIN ({_HEX_DIGITS}) l "
                f"WHERE {number} < %s AND NOT EXISTS "
                f"(SELECT 1 FROM {self.table} e WHERE e.{self.bucket} = {number})", [BUCKETS])

    def take(self, instance: str, buckets: Collection[int], lease_ms: int) -> Fragment:
        """``instance`` takes those of ``buckets`` that are free or whose lease expired,
        raising their epochs; a bucket it still holds is left as it is (renew it)."""
        within, params = self._buckets_in(buckets)
        offset = self.ops.offset_param(lease_ms)
        return (f"UPDATE {self.table} SET {self.owner} = %s, {self.epoch} = {self.epoch} + 1, "
                f"{self.expires_at} = {self.ops.now_plus_sql()} WHERE {within} AND "
                f"({self.owner} IS NULL OR {self.expires_at} IS NULL "
                f"OR {self.expires_at} <= {self.ops.now_sql})",
                [instance, offset, *params])

    def renew(self, instance: str, lease_ms: int) -> Fragment:
        """Extend every lease ``instance`` still holds. One that expired is not renewed:
        another relay may be taking it, and ``instance`` takes it again under a new epoch
        if its share still names it."""
        return (f"UPDATE {self.table} SET {self.expires_at} = {self.ops.now_plus_sql()} "
                f"WHERE {self.owner} = %s AND {self._live()}",
                [self.ops.offset_param(lease_ms), instance])

    def release(self, instance: str, buckets: Collection[int] | None = None) -> Fragment:
        """Let go of ``buckets`` (every one, without) if ``instance`` holds them. The
        epoch stays: the next taker raises it."""
        sql = f"{self.free_all()[0]} WHERE {self.owner} = %s"
        if buckets is None:
            return sql, [instance]
        within, params = self._buckets_in(buckets)
        return f"{sql} AND {within}", [instance, *params]

    def free_all(self) -> Fragment:
        """Let go of every bucket, whoever holds it (a test database flushed between
        tests). The epochs stay, as :meth:`release` leaves them."""
        return f"UPDATE {self.table} SET {self.owner} = NULL, {self.expires_at} = NULL", []

    def held(self, instance: str) -> Fragment:
        """The buckets ``instance`` holds and their epochs, by bucket."""
        return (f"SELECT {self.bucket}, {self.epoch} FROM {self.table} "
                f"WHERE {self.owner} = %s AND {self._live()} ORDER BY {self.bucket}",
                [instance])

    def holders(self) -> Fragment:
        """Every bucket's owner (None: free), epoch and whether its lease still runs."""
        live = f"CASE WHEN {self._live()} THEN 1 ELSE 0 END"
        return (f"SELECT {self.bucket}, {self.owner}, {self.epoch}, {live} FROM {self.table} "
                f"ORDER BY {self.bucket}", [])


def _epochs(cursor: Any) -> dict[int, int]:
    return {int(bucket): int(epoch) for bucket, epoch in cursor.fetchall()}


class BucketLeases(BoundStore):
    """The bucket leases beside the outbox on one database alias: each method is one
    transaction (see :class:`BucketLeaseSql` for what each statement does)."""

    def __init__(self, using: str | None = None) -> None:
        super().__init__(using)
        self.sql = BucketLeaseSql(self.dialect.ops)

    def take(self, instance: str, buckets: Collection[int], lease: float, *,
             then: Callable[[Any, Mapping[int, int]], object] | None = None
             ) -> dict[int, int]:
        """Take what is free or expired of ``buckets``; returns every bucket ``instance``
        holds afterwards with its epoch (a bucket whose epoch moved was taken now).
        ``then`` runs in the same transaction with the cursor and those of ``buckets``
        held, by epoch: the sweep of the batches claimed from them before
        (:meth:`.InFlightJournal.sweep`)."""
        def run(cursor: Any) -> dict[int, int]:
            if buckets:
                cursor.execute(*self.sql.take(instance, buckets, _ms(lease)))
            cursor.execute(*self.sql.held(instance))
            held = _epochs(cursor)
            if then is not None:
                taken = {b: held[b] for b in buckets if b in held}
                if taken:
                    then(cursor, taken)
            return held
        return self._run(run)

    def renew(self, instance: str, lease: float) -> dict[int, int]:
        """Renew what ``instance`` holds; returns what it still holds, with epochs."""
        def run(cursor: Any) -> dict[int, int]:
            cursor.execute(*self.sql.renew(instance, _ms(lease)))
            cursor.execute(*self.sql.held(instance))
            return _epochs(cursor)
        return self._run(run)

    def release(self, instance: str, buckets: Collection[int] | None = None) -> None:
        """Let go of ``buckets`` (all, without). Nothing reads a row count here: a SQL
        Server session with NOCOUNT on reports -1 for every statement."""
        if buckets is not None and not buckets:
            return
        self._run(lambda cursor: cursor.execute(*self.sql.release(instance, buckets)),
                  atomic=False)

    def holders(self) -> list[tuple[int, str | None, int, bool]]:
        """Every bucket, its owner, its epoch and whether the lease runs, by bucket."""
        def run(cursor: Any) -> list[tuple[int, str | None, int, bool]]:
            cursor.execute(*self.sql.holders())
            return [(int(b), o, int(e), bool(live)) for b, o, e, live in cursor.fetchall()]
        return self._run(run, atomic=False)


def _ms(seconds: float) -> int:
    return round(seconds * 1000)
