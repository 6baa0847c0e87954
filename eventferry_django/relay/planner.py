"""What each claim asks for, and how a claim is cut into batches.

A policy the relay's claimer asks, not woven into the loop: it holds the tuning state and
takes its clock as an argument, so it is tested without a database.

**Rows and windows.** Each claim asks for a batch (less what ``--max-events`` leaves).
What it reads is bounded by what it asks for (a window of fresh rows, see
:mod:`~eventferry_django.store.claim`), so it always asks for the full batch. A relay
with a share of the buckets (see :mod:`.membership`) reads its own buckets, bucket by
bucket; a relay alone reads every bucket, oldest first.

**Helping.** A relay whose own buckets ran out of rows to claim reads every bucket, bucket
by bucket, in its next claim, so a relay whose share is done helps with the others'
(their owners keep their aggregates: a helping relay's next claim is of its own buckets
again, and a relay re-claims only the aggregates it just settled that are still its
own). A relay claims its own aggregates again as they come free, in the transaction that
settles them, so there is often nothing to help with: after a help that found nothing,
a relay helps again only once its own buckets have had rows again. An idle relay never
helps: a burst then finds every relay in its own buckets.

**Expired leases.** Rows a dead relay held come back when their lease expires, but
looking for them reads the entry of every claimed row in the claim index, and on
PostgreSQL each settled row leaves a dead entry there until VACUUM: at thousands of
events a second, hundreds of thousands of them, read again by every claim (measured:
210 of a claim's 240 ms). So a relay looks for expired leases once every tenth of the
lease timeout, which delays taking back a dead relay's rows by as much at most; due
retries and scheduled rows are cheap to find, and every claim still looks for them.

**Batches in flight.** A fresh claim is cut into as many batches as may be in flight,
each chain whole (publishing one chain in two calls would let its end out while its
start waits). Afterwards each settlement claims the successors of its own batch's
aggregates (the others' are still in flight), so the batches stay apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ..store.claim import ALL_BUCKETS, ClaimRequest
from ..store.outbox import ClaimedEvent


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


class ClaimPlanner:
    """Says what each claim asks for (:meth:`next_claim`), learns from what it found
    (:meth:`found`), and cuts a fresh claim into batches (:meth:`split`)."""

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
        #: When a claim must look for expired leases again, whatever else it asks for.
        self.leases_due_at = 0.0
        #: Whether the next claim of a relay with a share reads every bucket ("Helping"),
        #: and whether it may: its own buckets had rows since its last fruitless help.
        self.helping = False
        self._may_help = False

    def next_claim(self, *, claimed: int = 0, in_flight: int = 0,
                   buckets: tuple[int, ...] | None = None) -> ClaimRequest | None:
        """The next claim of a relay whose own buckets are ``buckets`` (None: every
        bucket), given how many rows were claimed so far and how many are in flight;
        None when ``max_events`` leaves nothing to ask for."""
        rows = self.batch_size
        if self.max_events is not None:
            rows = min(rows, self.max_events - claimed - in_flight)
        if rows <= 0:
            return None
        return ClaimRequest(rows, self.lease_timeout, max_chain=self.max_chain,
                            buckets=ALL_BUCKETS if self.helping else buckets,
                            expired_leases=self._clock() >= self.leases_due_at)

    def found(self, request: ClaimRequest, rows: int) -> None:
        """``request`` found ``rows`` rows."""
        if request.expired_leases:
            self.leases_due_at = self._clock() + self.lease_timeout / 10
        helped = request.buckets == ALL_BUCKETS
        own = request.buckets is not None and not helped
        if own and rows:
            self._may_help = True
        elif helped and not rows:
            self._may_help = False
        self.helping = own and not rows and self._may_help

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
