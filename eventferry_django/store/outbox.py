"""The outbox store bound to one database alias: the contract's operations with the
transaction handling around them. The SQL itself lives in the vendor modules."""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
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
from .sql import Fragment


@dataclass(frozen=True)
class ClaimedEvent:
    """A row this relay holds: the message to publish and the lease that proves it."""

    message: OutboundMessage
    lease: Any

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


def _by_lease(events: Iterable[ClaimedEvent]) -> dict[Any, list[int]]:
    groups: dict[Any, list[int]] = defaultdict(list)
    for event in events:
        groups[event.lease].append(event.id)
    return groups


def _utc(value: dt.datetime | str) -> dt.datetime:
    """A stored time as an aware UTC datetime: SQLite returns the text it stores, SQL
    Server and MariaDB/MySQL a naive datetime, PostgreSQL an aware one; all are UTC."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _truncate(error: str, limit: int = 4000) -> str:
    return error if len(error) <= limit else error[: limit - 1] + "…"


class OutboxStore(BoundStore):
    """The outbox table on one database alias (``EVENTFERRY["DATABASE"]`` by default).

    ``max_chain`` (default ``EVENTFERRY["MAX_CHAIN"]``) is how many rows of one aggregate
    a claim may hand out, in id order; 1 hands out heads only.
    """

    def __init__(self, using: str | None = None, *, max_chain: int | None = None) -> None:
        super().__init__(using)
        self.max_chain = max_chain if max_chain is not None else get_settings().max_chain

    # -- claim -------------------------------------------------------------------------
    def claim(self, limit: int, lease_timeout: float, *, heads: int | None = None
              ) -> list[ClaimedEvent]:
        """Take up to ``limit`` (1..10,000) claimable rows, chained up to this store's
        ``max_chain``; see :class:`ClaimRequest` and the contract for which."""
        return self.take(self.request(limit, lease_timeout, heads=heads))

    def request(self, limit: int, lease_timeout: float, *, heads: int | None = None
                ) -> ClaimRequest:
        """A claim of ``limit`` rows with this store's ``max_chain``."""
        return ClaimRequest(limit, lease_timeout, heads=heads, max_chain=self.max_chain)

    def take(self, request: ClaimRequest) -> list[ClaimedEvent]:
        """Run ``request``. Meant for autocommit: where the vendor's claim is one
        statement (or, on SQL Server, one batch with its own transaction) no extra
        BEGIN/COMMIT is paid."""
        rows = self._run(lambda cursor: self.dialect.claim.run(cursor, request),
                         atomic=self.dialect.features.claim_needs_transaction)
        return [self._claimed(row) for row in rows]

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
    def _claimed(row: Sequence[Any]) -> ClaimedEvent:
        (row_id, message_id, topic, aggregate_type, aggregate_id, partition_key, payload,
         headers, trace_id, attempts, claimed_at, created_at, schema_version) = row
        message = OutboundMessage(
            id=int(row_id), message_id=message_id, topic=topic,
            aggregate_type=aggregate_type, aggregate_id=aggregate_id,
            partition_key=partition_key, payload=payload, headers=json.loads(headers),
            trace_id=trace_id, attempts=int(attempts), created_at=_utc(created_at),
            schema_version=schema_version,
        )
        return ClaimedEvent(message, claimed_at)

    # -- settle ------------------------------------------------------------------------
    def ack(self, events: Sequence[ClaimedEvent]) -> int:
        """Mark delivered events done; one statement per lease (normally one). Returns how
        many rows were still ours; the rest were taken back and are left alone."""
        if not events:
            return 0
        groups = _by_lease(events)
        return self._run(lambda cursor: self._ack(cursor, groups), atomic=len(groups) > 1)

    def _ack(self, cursor: Any, groups: dict[Any, list[int]]) -> int:
        return sum(self.dialect.settlement.ack(cursor, ids, lease) for lease, ids in groups.items())

    def renew(self, events: Iterable[ClaimedEvent], lease_timeout: float) -> int:
        """Extend the leases of ``events`` that are still held to ``lease_timeout`` seconds
        from now (the database's clock); one short transaction per lease. Rows another
        relay took back, or that were settled, are left alone. Returns rows renewed."""
        groups = _by_lease(events)
        if not groups:
            return 0
        timeout_ms = round(lease_timeout * 1000)

        def renew(ids: list[int], lease: Any) -> int:
            return self._run(
                lambda cursor: self.dialect.settlement.renew(cursor, ids, lease, timeout_ms))

        return sum(renew(ids, lease) for lease, ids in groups.items())

    def release(self, events: Sequence[ClaimedEvent]) -> int:
        """Hand events back as pending without spending an attempt (broker outage)."""
        if not events:
            return 0
        groups = _by_lease(events)
        return self._run(lambda cursor: sum(
            self.dialect.settlement.release(cursor, ids, lease) for lease, ids in groups.items()
        ), atomic=len(groups) > 1)

    def record_failures(self, failures: Sequence[Failure]) -> int:
        """Retry or bury refused events, all in one transaction."""
        if not failures:
            return 0
        return self._run(lambda cursor: self._record_failures(cursor, failures))

    def _record_failures(self, cursor: Any, failures: Sequence[Failure]) -> int:
        settled = 0
        for lease, group in _group([f for f in failures if not f.dead]).items():
            settled += self.dialect.settlement.fail(cursor, [
                (f.event.id, max(1, round(f.delay * 1000)), _truncate(f.error)) for f in group
            ], lease)
        for lease, group in _group([f for f in failures if f.dead]).items():
            settled += self.dialect.settlement.bury(cursor, [
                (f.event.id, _truncate(f.error), f.counts_attempt) for f in group
            ], lease)
        return settled

    def settle(
        self,
        delivered: Sequence[ClaimedEvent],
        failures: Sequence[Failure],
        *,
        claim: ClaimRequest | None = None,
    ) -> tuple[int, list[ClaimedEvent]]:
        """Ack ``delivered``, record ``failures`` and, with ``claim``, claim the next batch:
        one transaction and one commit where the vendor's claim can join it.

        Returns how many settled rows were still ours, and the new claim.
        """
        if claim is not None and not self.dialect.features.claim_joins_transaction:
            settled = self.ack(delivered) + self.record_failures(failures)
            return settled, self.take(claim)
        groups = _by_lease(delivered)

        def run(cursor: Any) -> tuple[int, list[tuple[Any, ...]]]:
            settled = self._ack(cursor, groups) + self._record_failures(cursor, failures)
            return settled, [] if claim is None else self.dialect.claim.run(cursor, claim)

        statements = len(groups) + len(failures) + (1 if claim is not None else 0)
        if statements == 0:
            return 0, []
        claim_in_transaction = claim is not None and self.dialect.features.claim_needs_transaction
        settled, rows = self._run(run, atomic=statements > 1 or claim_in_transaction)
        return settled, [self._claimed(row) for row in rows]

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


def _group(failures: Sequence[Failure]) -> dict[Any, list[Failure]]:
    groups: dict[Any, list[Failure]] = defaultdict(list)
    for failure in failures:
        groups[failure.event.lease].append(failure)
    return groups
