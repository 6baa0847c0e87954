"""The outbox store bound to one database alias: the contract's operations with the
transaction handling around them. The SQL itself lives in the vendor modules."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..conf import get_settings
from ..contract import CLOSED, DONE, MAX_BATCH, bucket_of
from ..exceptions import EventferryError
from ..publishers.base import OutboundMessage
from .bound import BoundStore
from .bucket_fill import AGGREGATES_PER_FILL
from .claim import ClaimRequest
from .closed_rows import ClosedRowSelection, IdChecksum, SelectionStats
from .in_flight_journal import InFlightJournal
from .registry import new_instance
from .sql import Fragment


@dataclass(frozen=True)
class ClaimedEvent:
    """A row in one of this relay's batches in flight: the message to publish, and the
    number of the batch it was claimed in (its row in the journal of batches in
    flight, which says whether it is still this relay's to settle)."""

    message: OutboundMessage
    batch: int

    @property
    def id(self) -> int:
        return self.message.id


@dataclass(frozen=True)
class Failure:
    """A message the broker refused: retried after ``delay`` seconds, unless ``dead``."""

    event: ClaimedEvent
    error: str
    delay: float = 0.0
    dead: bool = False
    counts_attempt: bool = True


@dataclass(frozen=True)
class Settlement:
    """What became of one batch: its rows ``delivered``, its ``failures``; rows in
    neither (the broker was away, the relay is leaving, a row held back behind a
    refused head) stay pending, untouched, for the next claim."""

    batch: int
    delivered: Sequence[ClaimedEvent] = ()
    failures: Sequence[Failure] = ()


def _utc(value: dt.datetime | str | float) -> dt.datetime:
    """A stored time as an aware UTC datetime: SQLite returns the text it stores, SQL
    Server and MariaDB/MySQL a naive datetime, PostgreSQL's claim seconds since the
    epoch (see its ``select_column``); all are UTC."""
    if isinstance(value, float):
        return dt.datetime.fromtimestamp(value, dt.UTC)
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _headers(text: str) -> dict[str, Any]:
    """A row's headers from their JSON text (an object: publish_event() checks). Most
    events have none, and decoding their ``{}`` was a fifth of the time a claimed row
    took to become a message."""
    return {} if text == "{}" else json.loads(text)


def _truncate(error: str, limit: int = 4000) -> str:
    return error if len(error) <= limit else error[: limit - 1] + "…"


class OutboxStore(BoundStore):
    """The outbox table on one database alias (``EVENTFERRY["DATABASE"]`` by default).

    ``max_chain`` (default ``EVENTFERRY["MAX_CHAIN"]``) is how many rows of one aggregate
    a claim may hand out, in id order; 1 hands out heads only.
    """

    def __init__(self, using: str | None = None, *, max_chain: int | None = None,
                 instance: str | None = None) -> None:
        super().__init__(using)
        self.max_chain = max_chain if max_chain is not None else get_settings().max_chain
        #: The relay instance this store claims for: the name its batches in flight and
        #: its bucket leases are held under.
        self.instance = instance or new_instance()
        self.journal = InFlightJournal(using)
        self._batches = itertools.count(1)

    # -- claim -------------------------------------------------------------------------
    def claim(self, limit: int, *, heads: int | None = None,
              buckets: tuple[int, ...] | None = None) -> list[ClaimedEvent]:
        """Claim a batch of up to ``limit`` (1..10,000) rows, chained up to this store's
        ``max_chain``, of ``buckets`` (None: oldest first, every bucket); see
        :class:`ClaimRequest` and the contract for which."""
        return self.take(self.request(limit, heads=heads, buckets=buckets))

    def request(self, limit: int, *, heads: int | None = None,
                buckets: tuple[int, ...] | None = None) -> ClaimRequest:
        """A claim of ``limit`` rows with this store's ``max_chain``."""
        return ClaimRequest(limit, heads=heads, max_chain=self.max_chain, buckets=buckets)

    def take(self, request: ClaimRequest, in_flight: Sequence[str] = ()) -> list[ClaimedEvent]:
        """Run ``request`` as a new batch, passing over the aggregates ``in_flight`` (those
        of the relay's other batches in flight): the rows read and the batch's journal
        row written in one transaction, nothing written to the rows themselves."""
        return self._run(lambda cursor: self._take(cursor, request, in_flight))

    def _take(self, cursor: Any, request: ClaimRequest, in_flight: Sequence[str]
              ) -> list[ClaimedEvent]:
        rows = self.dialect.claim.run(cursor, request, in_flight)
        if not rows:
            return []
        batch = next(self._batches)
        self.journal.record(cursor, self.instance, batch, [int(row[0]) for row in rows])
        return [self._claimed(row, batch) for row in rows]

    def fill_buckets(self) -> int:
        """Give the fresh rows without a bucket theirs (see :mod:`.bucket_fill`), the
        oldest :data:`~.bucket_fill.FILL_WINDOW` rows' aggregates,
        :data:`~.bucket_fill.AGGREGATES_PER_FILL` aggregates to a statement, each
        committed on its own; returns how many aggregates it filled (0: none left)."""
        fill = self.dialect.bucket_fill

        def unbucketed(cursor: Any) -> list[tuple[Any, ...]]:
            cursor.execute(*fill.unbucketed_sql())
            return list(cursor.fetchall())

        def filler(sql: Fragment) -> Callable[[Any], None]:
            return lambda cursor: cursor.execute(*sql)

        aggregates = sorted({aggregate for _, aggregate in self._run(unbucketed, atomic=False)})
        for start in range(0, len(aggregates), AGGREGATES_PER_FILL):
            part = aggregates[start:start + AGGREGATES_PER_FILL]
            self._run(filler(fill.fill_sql([(a, bucket_of(a)) for a in part])), atomic=False)
        return len(aggregates)

    @staticmethod
    def _claimed(row: Sequence[Any], batch: int) -> ClaimedEvent:
        (row_id, message_id, topic, aggregate_type, aggregate_id, partition_key, payload,
         headers, trace_id, attempts, created_at, schema_version) = row
        message = OutboundMessage(
            id=int(row_id), message_id=message_id, topic=topic,
            aggregate_type=aggregate_type, aggregate_id=aggregate_id,
            partition_key=partition_key, payload=payload, headers=_headers(headers),
            trace_id=trace_id, attempts=int(attempts), created_at=_utc(created_at),
            schema_version=schema_version,
        )
        return ClaimedEvent(message, batch)

    # -- settle ------------------------------------------------------------------------
    def settle(self, settlement: Settlement, *, claim: ClaimRequest | None = None,
               in_flight: Sequence[str] = ()) -> tuple[int, list[ClaimedEvent]]:
        """Settle one batch and, with ``claim``, claim the next (passing over the
        aggregates ``in_flight``): one transaction, one commit.

        The batch leaves the journal first, and only the rows still this relay's are
        settled (another relay that took over a bucket of the batch took its rows out;
        see :mod:`.in_flight_journal`). Returns how many of the batch's delivered and
        failed rows were still this relay's, and the new claim."""
        def run(cursor: Any) -> tuple[int, list[ClaimedEvent]]:
            settled = self._settle(cursor, settlement)
            return settled, [] if claim is None else self._take(cursor, claim, in_flight)
        return self._run(run)

    def _settle(self, cursor: Any, settlement: Settlement) -> int:
        left = self.journal.settled(cursor, self.instance, settlement.batch)
        delivered, failures = settlement.delivered, settlement.failures
        if left is not None:
            ours = set(left)
            delivered = [e for e in delivered if e.id in ours]
            failures = [f for f in failures if f.event.id in ours]
        sql = self.dialect.settlement
        if delivered:
            sql.ack(cursor, [e.id for e in delivered])
        retried = [f for f in failures if not f.dead]
        if retried:
            sql.fail(cursor, [(f.event.id, f.event.message.attempts,
                               max(1, round(f.delay * 1000)), _truncate(f.error))
                              for f in retried])
        buried = [f for f in failures if f.dead]
        if buried:
            sql.bury(cursor, [(f.event.id, f.event.message.attempts, _truncate(f.error),
                               f.counts_attempt) for f in buried])
        return len(delivered) + len(failures)

    def hand_back(self, batch: int) -> None:
        """Take a batch out of the journal with nothing settled: its rows stay pending,
        no attempt spent (the broker was away, or the relay is leaving)."""
        self.settle(Settlement(batch))

    # -- purge -------------------------------------------------------------------------
    def purge(
        self,
        older_than: dt.datetime,
        *,
        statuses: Sequence[int] = (DONE,),
        batch_size: int = 1000,
        max_rows: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Delete done (and, if asked, dead) rows processed before ``older_than``, in
        batches, until a batch comes back short or ``max_rows`` (a soft cap) is passed.
        Open rows (pending, claimed, failed) are never deleted, whatever is asked."""
        if not set(statuses) <= set(CLOSED) or not statuses:
            raise EventferryError("purge deletes done and/or dead rows only.")
        cutoff = self.utc_param(older_than)
        return self.delete_in_batches(
            lambda cursor, limit: self.dialect.purge.purge_batch(cursor, statuses, cutoff, limit),
            batch_size=batch_size, max_rows=max_rows, progress=progress,
        )

    # -- history -----------------------------------------------------------------------
    def utc_now(self) -> dt.datetime:
        """The database's UTC clock, the one that stamps created_at and processed_at."""
        return self._run(self.dialect.closed_rows.utc_now, atomic=False)

    def selection_stats(self, selection: ClosedRowSelection) -> list[SelectionStats]:
        """Rows, id range and id checksum of a selection of closed rows, per (topic,
        status), from one statement: the archive's freeze."""
        return self._run(lambda cursor: self.dialect.closed_rows.selection_stats(cursor, selection),
                         atomic=False)

    def purge_selection(self, selection: ClosedRowSelection, archived: IdChecksum) -> int | None:
        """Delete a committed archive run's rows in one id range (``selection``: the
        run's frozen selection, narrowed to the range) in one statement, if the rows
        there are exactly the ``archived`` ones by count and id checksum; the check and
        the DELETE are one transaction. Returns rows deleted, or None when nothing was
        deleted because the rows differ (:meth:`purge_archived` takes such a range)."""
        if selection.id_range is None:
            raise EventferryError("purge_selection needs an id range.")
        return self._run(lambda cursor: self.dialect.closed_rows.purge_selection(
            cursor, selection, archived))

    def purge_archived(
        self, rows: Sequence[tuple[int, dt.datetime]], *, statuses: Sequence[int]
    ) -> int:
        """Delete exactly these archived (id, processed_at) rows where they are still in
        ``statuses`` (done and/or dead) with that processed_at. A row redriven since it
        was archived is not deleted. Returns rows deleted.

        One statement, or one per ``max_delete_batch`` rows where the vendor bounds it
        (SQL Server: below lock escalation), each committed on its own as purge's are."""
        if not set(statuses) <= set(CLOSED) or not statuses:
            raise EventferryError("purge deletes done and/or dead rows only.")
        if len(rows) > MAX_BATCH:
            raise EventferryError(f"at most {MAX_BATCH:,} rows per purge batch, got {len(rows):,}.")
        codes = [int(s) for s in statuses]
        step = self.dialect.purge.max_delete_batch

        def purge(part: Sequence[tuple[int, dt.datetime]]) -> int:
            return self._run(lambda cursor: self.dialect.closed_rows.purge_archived(
                cursor, part, codes), atomic=False)

        return sum(purge(rows[start:start + step]) for start in range(0, len(rows), step))

