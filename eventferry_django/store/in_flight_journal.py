"""The batches in flight: the one-write design's journal (docs/design/one-write.md), and
the fence that keeps a relay whose buckets were taken over from settling their rows.

The claim writes nothing to the rows it hands out, so what says they are in flight, and
whose, is one row per batch here: written in the claim's transaction, before anything of
the batch is published, and deleted by the transaction that settles it. The admin,
``outbox_status`` and the metrics read it; a takeover rewrites it.

**A takeover.** The relay that takes a bucket (its holder's lease expired), in the
transaction of the take, sweeps the journal (:meth:`InFlightJournal.sweep`): from every
other relay's batches it takes out the rows of that bucket, raises their ``attempts``
(an event that crashes every relay that takes it still ends dead) and counts them in
the batch's ``taken``. Another relay's rows of a bucket just taken were claimed while it
held the bucket, before it lost it: no two relays hold a bucket at once. The journal is
a few rows per relay, so the sweep reads it whole; which of their rows are in the taken
buckets, the outbox says.

**The fence.** A settlement first deletes its batch's row if nothing was taken from it
(:meth:`InFlightJournal.settled`), then looks for the row: gone, the batch is settled
whole (the usual case: one statement where the DELETE hands back what it deleted, two
on MariaDB/MySQL). Still there, the batch was swept, and the settlement settles only
what is left of it, read under the row's lock, and deletes the row. A sweep never
deletes a batch's row, even one it took whole, before a day has passed (see below), so
a row that is gone was deleted by its own settlement (now, or before an outage made the
relay settle it again). The row's lock decides who comes first: a sweep waits for a
settlement that deleted the row to commit and then finds nothing to take; a settlement
waits for a sweep that changed the row and then sees what it left. Nothing here reads a
row count, which a session with ``NOCOUNT`` on (SQL Server) reports as -1, and no lock
is taken that the settlement's own write would not take.

**Batches taken whole.** Their rows stay, empty, for their own settlements, which then
settle nothing. A relay that died never comes for them, so each sweep first forgets the
emptied batches claimed more than :data:`FORGET_EMPTIED_AFTER` ago: without that, every
relay that died mid-batch left up to ``BATCHES_IN_FLIGHT`` rows for good, which each
sweep, ``outbox_status`` and the admin read. A relay paused longer than that, whose
batch was taken whole, finds the row gone on resuming and settles the batch whole: its
acks mark done the rows of it still open, which it had delivered before its pause; its
retries and burials change nothing, for the sweep counted an attempt on each row.

A batch's rows are stored as their ids in order, each written as its distance from the
one before (:func:`encode`): ``1000123,1,4,1`` is rows 1000123, 1000124, 1000128 and
1000129. A batch of 500 rows takes some 1,500 characters, under the size at which
PostgreSQL compresses a value out of line.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..contract import FAILED, PENDING
from .bound import BoundStore
from .ops import SqlOps
from .sql import Fragment, compose

#: How long a batch that takeovers took whole stays in the journal (see the module's
#: docstring): far beyond any pause a relay is expected to come back from.
FORGET_EMPTIED_AFTER = dt.timedelta(days=1)


def encode(ids: Collection[int]) -> str:
    """``ids`` as the journal's ``events`` text: in order, each as its distance from the
    one before."""
    ordered = sorted(ids)
    return ",".join(str(i - before) for i, before in zip(ordered, [0, *ordered], strict=False))


def decode(text: str) -> list[int]:
    """The journal's ``events`` text as the ids it holds, in order."""
    ids, at = [], 0
    for step in filter(None, text.split(",")):
        at += int(step)
        ids.append(at)
    return ids


@dataclass(frozen=True)
class JournalEntry:
    """One batch in flight, as the journal holds it."""

    relay: str
    batch: int
    claimed_at: dt.datetime | str
    taken: int
    ids: list[int]


class InFlightSql:
    """The journal's statements beside one outbox (the dialect's ``ops``)."""

    def __init__(self, ops: SqlOps) -> None:
        self.ops = ops
        self.table = ops.name.in_flight.quoted(ops.vendor)
        q = ops.quote
        self.relay, self.batch, self.taken = q("relay"), q("batch"), q("taken")
        self.events, self.event_count = q("events"), q("event_count")
        self.claimed_at = q("claimed_at")

    def _batch_is(self, relay: str, batch: int) -> Fragment:
        return f"{self.relay} = %s AND {self.batch} = %s", [relay, batch]

    def record(self, relay: str, batch: int, ids: Collection[int]) -> Fragment:
        """The row of a batch just claimed."""
        return (f"INSERT INTO {self.table} ({self.relay}, {self.batch}, {self.event_count}, "
                f"{self.events}) VALUES (%s, %s, %s, %s)", [relay, batch, len(ids), encode(ids)])

    def forget_whole(self, relay: str, batch: int) -> Fragment:
        """Delete the batch's row if nothing was taken from it (the settlement's fence),
        handing back its ``taken`` where the vendor can (:attr:`tells_forgotten`)."""
        where, params = self._batch_is(relay, batch)
        before, after = self.ops.deleted_column("taken") or ("", "")
        return (f"DELETE FROM {self.table}{before} WHERE {where} AND {self.taken} = 0{after}",
                params)

    @property
    def tells_forgotten(self) -> bool:
        """Whether :meth:`forget_whole` returns a row when it deleted one."""
        return self.ops.deleted_column("taken") is not None

    def lock(self, relay: str, batch: int) -> Fragment:
        """Lock the batch's row against sweeps until the transaction ends: an UPDATE that
        changes nothing, which every vendor runs on the row's latest version."""
        where, params = self._batch_is(relay, batch)
        return f"UPDATE {self.table} SET {self.taken} = {self.taken} WHERE {where}", params

    def events_of(self, relay: str, batch: int) -> Fragment:
        where, params = self._batch_is(relay, batch)
        return f"SELECT {self.events} FROM {self.table} WHERE {where}", params

    def forget(self, relay: str, batch: int) -> Fragment:
        where, params = self._batch_is(relay, batch)
        return f"DELETE FROM {self.table} WHERE {where}", params

    def entries(self, relay: str | None = None) -> Fragment:
        """Every batch in flight (of ``relay``, with one), oldest first."""
        columns = f"{self.relay}, {self.batch}, {self.claimed_at}, {self.taken}, {self.events}"
        where, params = (f" WHERE {self.relay} = %s", [relay]) if relay else ("", [])
        return (f"SELECT {columns} FROM {self.table}{where} "
                f"ORDER BY {self.claimed_at}, {self.ops.quote('id')}", params)

    def in_buckets(self, ids: Sequence[int], buckets: Collection[int]) -> Fragment:
        """Which of the rows ``ids`` are in ``buckets``."""
        q = self.ops.quote
        return compose(
            f"SELECT {q('id')} FROM {self.ops.table} WHERE {{}} "
            f"AND {q('bucket')} IN ({', '.join(['%s'] * len(buckets))})",
            self.ops.ids_condition(ids), ("", sorted(buckets)))

    def shrink(self, relay: str, batch: int, rest: Collection[int], taken: int) -> Fragment:
        """Leave ``rest`` of the batch, ``taken`` rows more taken; an empty batch stays
        until its own settlement deletes it (see the module's docstring)."""
        where, params = self._batch_is(relay, batch)
        return (f"UPDATE {self.table} SET {self.events} = %s, {self.event_count} = %s, "
                f"{self.taken} = {self.taken} + %s WHERE {where}",
                [encode(rest), len(rest), taken, *params])

    def forget_emptied(self, older_than: dt.timedelta) -> Fragment:
        """Delete the batches that takeovers took whole, claimed more than ``older_than``
        ago (see the module's docstring)."""
        milliseconds = round(older_than.total_seconds() * 1000)
        cutoff, params = self.ops.now_plus(self.ops.offset_param(-milliseconds))
        return (f"DELETE FROM {self.table} WHERE {self.event_count} = 0 "
                f"AND {self.taken} > 0 AND {self.claimed_at} < {cutoff}", params)

    def count_attempt(self, ids: Sequence[int]) -> Fragment:
        """One more attempt for those of ``ids`` still open: their relay lost them."""
        condition, params = self.ops.ids_condition(ids)
        attempts = self.ops.quote("attempts")
        return (f"UPDATE {self.ops.table} SET {attempts} = {attempts} + 1 "
                f"WHERE {condition} AND {self.ops.quote('status')} IN ({PENDING}, {FAILED})",
                params)


class InFlightJournal(BoundStore):
    """The batches in flight beside the outbox on one database alias. The methods that
    take a ``cursor`` run in the caller's transaction (the relay's claim, settlement or
    take); the others are one transaction each."""

    def __init__(self, using: str | None = None) -> None:
        super().__init__(using)
        self.sql = InFlightSql(self.dialect.ops)

    def record(self, cursor: Any, relay: str, batch: int, ids: Collection[int]) -> None:
        """Write the row of a batch just claimed, before anything of it is published."""
        cursor.execute(*self.sql.record(relay, batch, ids))

    def settled(self, cursor: Any, relay: str, batch: int) -> list[int] | None:
        """Take the batch out of the journal as its settlement begins. None: nothing was
        taken from it, settle it whole. Otherwise the ids left of it to settle (none, if
        it was taken whole), locked against sweeps until the transaction ends."""
        cursor.execute(*self.sql.forget_whole(relay, batch))
        if self.sql.tells_forgotten and cursor.fetchone() is not None:
            return None  # the usual case, in one statement
        cursor.execute(*self.sql.events_of(relay, batch))
        if cursor.fetchone() is None:
            return None
        cursor.execute(*self.sql.lock(relay, batch))
        cursor.execute(*self.sql.events_of(relay, batch))
        (events,) = cursor.fetchone()
        cursor.execute(*self.sql.forget(relay, batch))
        return decode(events)

    def sweep(self, cursor: Any, relay: str, buckets: Collection[int]) -> int:
        """After ``relay`` took ``buckets``, in the take's transaction: take the rows of
        those buckets out of every other relay's batches in flight, counting an attempt
        for each still open. Returns how many rows were taken. Batches taken whole long
        ago are forgotten first (only when there is one taken whole: no write else)."""
        entries = self._entries(cursor)
        if any(entry.taken and not entry.ids for entry in entries):
            cursor.execute(*self.sql.forget_emptied(FORGET_EMPTIED_AFTER))
        taken_in_all = 0
        for entry in entries:
            if entry.relay == relay or not self._in(cursor, entry.ids, buckets):
                continue
            # Read again under the row's lock: its settlement may have deleted it, or
            # another sweep changed it, since.
            cursor.execute(*self.sql.lock(entry.relay, entry.batch))
            cursor.execute(*self.sql.events_of(entry.relay, entry.batch))
            found = cursor.fetchone()
            if found is None:
                continue
            ids = decode(found[0])
            stale = self._in(cursor, ids, buckets)
            if not stale:
                continue
            cursor.execute(*self.sql.shrink(entry.relay, entry.batch,
                                             [i for i in ids if i not in stale], len(stale)))
            cursor.execute(*self.sql.count_attempt(sorted(stale)))
            taken_in_all += len(stale)
        return taken_in_all

    def _in(self, cursor: Any, ids: Sequence[int], buckets: Collection[int]) -> set[int]:
        """Which of ``ids`` are rows of ``buckets``."""
        if not ids:
            return set()
        cursor.execute(*self.sql.in_buckets(ids, buckets))
        return {int(row[0]) for row in cursor.fetchall()}

    def entries(self, relay: str | None = None) -> list[JournalEntry]:
        """Every batch in flight (of ``relay``, with one), oldest first."""
        return self._run(lambda cursor: self._entries(cursor, relay), atomic=False)

    def _entries(self, cursor: Any, relay: str | None = None) -> list[JournalEntry]:
        cursor.execute(*self.sql.entries(relay))
        return [JournalEntry(str(r), int(b), at, int(t), decode(e))
                for r, b, at, t, e in cursor.fetchall()]
