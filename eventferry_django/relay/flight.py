"""Batches in flight: claimed, handed to the publishing thread, not settled yet.

Per-aggregate order does not depend on how many are in flight: the claim hands out an
aggregate's rows only as one chain while no earlier row of it is open elsewhere, and a
chain is never split between batches, so batches in flight never share an aggregate and
each chain goes to the broker in one publisher call, in id order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial

from .. import metrics
from ..publishers.base import BrokerUnavailable, OutboundMessage, PublishResult
from ..store.outbox import ClaimedEvent, Failure
from .leases import LeaseKeeper
from .sender import Sender

Publish = Callable[[Sequence[OutboundMessage]], list[PublishResult]]


@dataclass
class Batch:
    """A claimed batch on its way through the broker."""

    events: list[ClaimedEvent]
    #: The events handed to the publisher, in the order of its results.
    publishing: list[ClaimedEvent]
    #: Rows buried unpublished, to record with the batch's settlement.
    failures: list[Failure] = field(default_factory=list)
    #: The publisher's results, once it has them; None when nothing is published.
    results: Future[list[PublishResult]] | None = None


class InFlight:
    """The batches handed to the publishing thread, oldest first.

    ``hand_back`` is called with a batch whose publication failed, before the failure is
    raised: its rows go back to the outbox unspent.
    """

    def __init__(self, sender: Sender, publish: Publish, leases: LeaseKeeper, *,
                 publisher_name: str, max_attempts: int,
                 hand_back: Callable[[Batch], None]) -> None:
        self._sender = sender
        self._publish = publish
        self._publisher_name = publisher_name
        self._leases = leases
        self._max_attempts = max_attempts
        self._hand_back = hand_back
        self._batches: deque[Batch] = deque()

    def __len__(self) -> int:
        return len(self._batches)

    @property
    def rows(self) -> int:
        return sum(len(batch.events) for batch in self._batches)

    def launch(self, parts: list[list[ClaimedEvent]], *, claimed_in: float) -> None:
        """Hand each batch to the publishing thread and keep it in flight (and its leases
        renewed); ``claimed_in`` is how long the claim took."""
        for events in parts:
            self._leases.hold(events, claimed_in=claimed_in)
            metrics.observe_batch(len(events))
            # Rows taken back from dead relays were charged an attempt at claim time; one
            # that has used them all is buried unpublished (it may be what kills relays).
            spent = [e for e in events if e.message.attempts >= self._max_attempts]
            batch = Batch(
                events,
                publishing=[e for e in events if e.message.attempts < self._max_attempts],
                failures=[Failure(e, f"gave up after {e.message.attempts} attempts: the lease "
                                  "expired each time (the relay holding it stopped before "
                                  "settling it)", dead=True, counts_attempt=False)
                          for e in spent],
            )
            if batch.publishing:
                batch.results = self._sender.submit(
                    partial(self._publish, [e.message for e in batch.publishing]))
            self._batches.append(batch)

    def take_oldest(self) -> tuple[Batch, list[PublishResult]]:
        """The oldest batch and the broker's answers for it, once the publishing thread
        has them. It stays in flight while the relay waits, so an interrupted wait still
        hands it back (see :meth:`abandon`). If there are no answers to be had, the batch
        is handed back and :class:`BrokerUnavailable` raised."""
        batch = self._batches[0]
        try:
            results = self._results(batch)
        except BrokerUnavailable:
            self._batches.popleft()  # handed back already
            raise
        self._batches.popleft()
        return batch, results

    def _results(self, batch: Batch) -> list[PublishResult]:
        if batch.results is None:
            return []
        try:
            results = batch.results.result()
            if len(results) != len(batch.publishing):
                raise BrokerUnavailable(
                    f"{self._publisher_name} answered {len(results)} results "
                    f"for {len(batch.publishing)} messages"
                )
            return results
        except Exception as exc:
            # Not the messages' fault as far as we can tell: hand them back unspent.
            self._hand_back(batch)
            if isinstance(exc, BrokerUnavailable):
                raise
            raise BrokerUnavailable(f"publisher raised {type(exc).__name__}: {exc}") from exc

    def abandon(self) -> Iterator[Batch]:
        """Take every batch out, oldest first, cancelling those the publishing thread has
        not started: they will never be sent now."""
        while self._batches:
            batch = self._batches.popleft()
            if batch.results is not None:
                batch.results.cancel()
            yield batch
