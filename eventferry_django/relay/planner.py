"""What each claim asks for, and which claimed rows go out.

A policy the relay's claimer asks, not woven into the loop: it holds no connection and
no clock, so it is tested without a database.

**Rows and buckets.** Each claim asks for a batch (less what ``--max-events`` leaves).
What it reads is bounded by what it asks for (a window of fresh rows, see
:mod:`~eventferry_django.store.claim`), so it always asks for the full batch. It reads the
buckets the relay holds leases on (see :mod:`.bucket_holder`), bucket by bucket; a relay
holding every bucket reads oldest first. No relay reads another's buckets: nothing but
the lease keeps two relays from claiming the same rows, since a claim writes nothing to
them.

**Batches in flight.** Each claim is one batch. The claim passes over the aggregates of
the relay's other batches in flight, so batches in flight never share an aggregate; a
settlement claims the next batch in its own transaction, its own aggregates free again.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..store.claim import ClaimRequest
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
    """A claim cut into the rows to publish and the rows to hold back.

    A chain whose head has been tried more often than the row behind it (the broker
    refused the head) goes out as its head alone: sent with the head, the rows behind it
    would reach consumers first if the broker refused the head again. They ride in the
    batch unpublished, stay pending, untouched, and wait behind the head until it is
    delivered or dead. A chain taken over whole from a relay that stopped has one
    attempt more on every row, so it still goes out whole.
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
    """Says what each claim asks for (:meth:`next_claim`)."""

    def __init__(self, *, batch_size: int, max_chain: int, max_events: int | None = None
                 ) -> None:
        self.batch_size = batch_size
        self.max_chain = max_chain
        self.max_events = max_events

    def next_claim(self, buckets: tuple[int, ...] | None, *, claimed: int = 0,
                   in_flight: int = 0, passing: int = 0) -> ClaimRequest | None:
        """The next claim from ``buckets`` (None: every bucket, oldest first), given how
        many rows were claimed so far and how many are in flight, ``passing`` of them in
        the batches the claim passes over; None when ``max_events`` leaves nothing to ask
        for, or no bucket is held."""
        rows = self.batch_size
        if self.max_events is not None:
            rows = min(rows, self.max_events - claimed - in_flight)
        if rows <= 0 or buckets == ():
            return None
        return ClaimRequest(rows, max_chain=self.max_chain, buckets=buckets, passing=passing)
