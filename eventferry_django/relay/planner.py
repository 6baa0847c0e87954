"""How much a relay asks for in each claim, and how a claim is cut into batches.

A policy the relay's loop asks, not woven into it: it holds the tuning state (the
adaptive limit, the refresh back-off) and takes its clock as an argument, so it is tested
without a database.

**The adaptive limit.** A claim that finds fewer claimable rows than it asks for scans
every open row to be sure, and a backlog queued behind few aggregates makes that scan
long, pass after pass. So after a short claim the relay asks for exactly as many heads as
it found, which stops the scan early. It asks for the full batch again when it was idle,
and now and then (every :data:`MIN_LIMIT_REFRESH_INTERVAL` seconds at first) to pick up
aggregates that became claimable meanwhile: due retries, expired leases, new aggregates.
Those refreshes are full scans, so each one that finds nothing more doubles the wait
before the next, up to :data:`MAX_LIMIT_REFRESH_INTERVAL`; new commits bring it back to
the minimum.

**Batches in flight.** A fresh claim is cut into as many batches as may be in flight,
each chain whole (publishing one chain in two calls would let its end out while its
start waits). Afterwards each settlement claims the successors of its own batch's
aggregates (the others' are still in flight), so the batches stay apart.

**Expired leases.** Rows a dead relay held come back when their lease expires, but
looking for them reads the entry of every claimed row in the claim index, and on
PostgreSQL each settled row leaves a dead entry there until VACUUM: at thousands of
events a second, hundreds of thousands of them, read again by every claim (measured:
210 of a claim's 240 ms). So a relay looks for expired leases once every tenth of the
lease timeout, which delays taking back a dead relay's rows by as much at most; due
retries and scheduled rows are cheap to find, and every claim still looks for them.

**Several relays.** Each claim carries the relay's current part of the aggregates (see
:mod:`.membership`); when the part changes, so do the heads there are to find, and the
next claim asks for the full batch again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ..store.outbox import ClaimedEvent, ClaimRequest
from ..store.sql import Partition

MIN_LIMIT_REFRESH_INTERVAL = 1.0
MAX_LIMIT_REFRESH_INTERVAL = 8.0


def chains(events: Sequence[ClaimedEvent]) -> dict[str, list[ClaimedEvent]]:
    """``events`` by aggregate, each list in id order, the aggregates in the order of their
    first event."""
    by_aggregate: dict[str, list[ClaimedEvent]] = {}
    for event in sorted(events, key=lambda e: e.id):
        by_aggregate.setdefault(event.message.aggregate_id, []).append(event)
    return by_aggregate


def refused_heads_alone(events: Sequence[ClaimedEvent]
                        ) -> tuple[list[ClaimedEvent], list[ClaimedEvent]]:
    """A claim cut into the rows to publish and the rows to hand straight back.

    A chain whose head has been tried more often than the row behind it (the broker
    refused the head) goes out as its head alone: sent with the head, the rows behind it
    would reach consumers first if the broker refused the head again. They go back
    unspent and wait behind it until it is delivered or dead. A chain taken back whole
    from a dead relay has one attempt more on every row, so it still goes out whole.
    """
    publish: list[ClaimedEvent] = []
    held_back: list[ClaimedEvent] = []
    for chain in chains(events).values():
        if len(chain) > 1 and chain[0].message.attempts > chain[1].message.attempts:
            publish.append(chain[0])
            held_back.extend(chain[1:])
        else:
            publish.extend(chain)
    return sorted(publish, key=lambda event: event.id), held_back


def aggregates(events: Sequence[ClaimedEvent]) -> int:
    """How many aggregates (heads) a claim found."""
    return len({event.message.aggregate_id for event in events})


class ClaimPlanner:
    """Says what each claim asks for (:meth:`next_claim`), learns from what it found
    (:meth:`found`), and cuts a fresh claim into batches (:meth:`split`).

    With ``max_chain`` 1 (heads only) a claim's rows are its heads, so both follow the
    adaptive limit; with chains the rows stay the batch size and only the heads adapt.
    """

    def __init__(
        self,
        *,
        batch_size: int,
        max_chain: int,
        lease_timeout: float,
        batches: int = 1,
        max_events: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.batch_size = batch_size
        self.max_chain = max_chain
        self.lease_timeout = lease_timeout
        self.batches = batches
        self.max_events = max_events
        self._clock = clock
        #: How many heads the next claim asks for.
        self.limit = batch_size
        #: The wait after the next refresh, and when the one after it is due.
        self.refresh_interval = MIN_LIMIT_REFRESH_INTERVAL
        self.refresh_at = 0.0
        #: When the next claim asks for the full batch: the limit it is tested against
        #: (the first claim finds out from nothing).
        self._refreshing_from: int | None = 0
        self._wakeups_seen = 0
        self._partition: Partition | None = None
        #: When a claim must look for expired leases again, whatever else it asks for.
        self.leases_due_at = 0.0

    def next_claim(self, *, claimed: int = 0, in_flight: int = 0,
                   partition: Partition | None = None) -> ClaimRequest | None:
        """The next claim, given how many rows were claimed so far and how many are in
        flight, in ``partition``; None when ``max_events`` leaves nothing to ask for."""
        if partition != self._partition:
            self._partition = partition
            self.limit, self._refreshing_from = self.batch_size, 0
        rows = self.limit if self.max_chain == 1 else self.batch_size
        if self.max_events is not None:
            rows = min(rows, self.max_events - claimed - in_flight)
        if rows <= 0:
            return None
        return ClaimRequest(rows, self.lease_timeout, heads=min(rows, self.limit),
                            max_chain=self.max_chain, partition=partition,
                            expired_leases=self._clock() >= self.leases_due_at)

    def found(self, request: ClaimRequest, heads: int, *, wakeups: int = 0) -> None:
        """``request`` found ``heads`` aggregates; ``wakeups`` counts the commit
        notifications seen so far (new commits make the next refresh come sooner)."""
        asked = request.heads if request.heads is not None else request.rows
        now = self._clock()
        if request.expired_leases:
            self.leases_due_at = now + self.lease_timeout / 10
        if self._refreshing_from is not None:
            found_more = heads > self._refreshing_from
            self.refresh_interval = MIN_LIMIT_REFRESH_INTERVAL if found_more else min(
                self.refresh_interval * 2, MAX_LIMIT_REFRESH_INTERVAL)
            self.refresh_at = now + self.refresh_interval
            self._refreshing_from = None
        if wakeups != self._wakeups_seen:
            self._wakeups_seen = wakeups
            self.refresh_interval = MIN_LIMIT_REFRESH_INTERVAL
            self.refresh_at = min(self.refresh_at, now + MIN_LIMIT_REFRESH_INTERVAL)
        if heads == 0:
            self.limit = self.batch_size
            self._refreshing_from = 0
        elif now >= self.refresh_at:
            self._refreshing_from = min(heads, self.limit)
            self.limit = self.batch_size
        elif heads < asked:
            self.limit = heads

    def split(self, events: Sequence[ClaimedEvent]) -> list[list[ClaimedEvent]]:
        """A fresh claim, cut into up to ``batches`` batches in id order, chains whole."""
        parts = min(self.batches, len(events))
        size = -(-len(events) // parts)
        batches: list[list[ClaimedEvent]] = [[]]
        for chain in chains(events).values():
            if len(batches[-1]) >= size and len(batches) < parts:
                batches.append([])
            batches[-1].extend(chain)
        return [sorted(batch, key=lambda event: event.id) for batch in batches]
