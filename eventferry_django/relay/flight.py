"""Batches in flight: claimed, handed to the publishing thread, not settled yet.

Per-aggregate order does not depend on how many are in flight: a claim passes over the
aggregates of the relay's other batches in flight and hands out an aggregate's rows only
as one chain behind its head, so batches in flight never share an aggregate and each
chain goes to the broker in one publisher call, in id order.

While a batch is in flight its rows' buckets stay with the relay (its
:class:`~.bucket_holder.BucketHolder` releases a bucket only once nothing of it is in
flight), so whoever takes a bucket next starts where this relay's settlements ended.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import partial

from .. import metrics
from ..contract import bucket_of
from ..publishers.base import BrokerUnavailable, OutboundMessage, PublishResult
from ..store.outbox import ClaimedEvent, Failure
from .bucket_holder import BucketHolder, LeasesLapsed
from .sender import Sender

Publish = Callable[[Sequence[OutboundMessage]], list[PublishResult]]


@dataclass
class Batch:
    """A claimed batch on its way through the broker."""

    #: The relay's number for the batch: its row in the journal of batches in flight.
    number: int
    events: list[ClaimedEvent]
    #: The events handed to the publisher, in the order of its results.
    publishing: list[ClaimedEvent]
    #: Rows buried unpublished, to record with the batch's settlement.
    failures: list[Failure] = field(default_factory=list)
    #: The publisher's results, once it has them; None when nothing is published.
    results: Future[list[PublishResult]] | None = None

    @property
    def aggregates(self) -> set[str]:
        return {event.message.aggregate_id for event in self.events}

    @property
    def buckets(self) -> set[int]:
        return buckets_of(self.events)


def buckets_of(events: Iterable[ClaimedEvent]) -> set[int]:
    """The buckets of ``events``' aggregates."""
    return {bucket_of(aggregate) for aggregate in {e.message.aggregate_id for e in events}}


class InFlight:
    """The batches handed to the publishing thread, oldest first.

    ``hand_back`` is called with a batch whose publication failed, before the failure is
    raised: its rows go back to the outbox unspent.
    """

    def __init__(self, sender: Sender, publish: Publish, holder: BucketHolder, *,
                 publisher_name: str, max_attempts: int,
                 hand_back: Callable[[Batch], None]) -> None:
        self._sender = sender
        self._publish = publish
        self._publisher_name = publisher_name
        self._holder = holder
        self._max_attempts = max_attempts
        self._hand_back = hand_back
        self._batches: deque[Batch] = deque()

    def __len__(self) -> int:
        return len(self._batches)

    @property
    def rows(self) -> int:
        return sum(len(batch.events) for batch in self._batches)

    @property
    def aggregates(self) -> list[str]:
        """The aggregates of every batch in flight: the next claim passes over them."""
        return sorted({a for batch in self._batches for a in batch.aggregates})

    def launch(self, events: list[ClaimedEvent]) -> None:
        """Hand a claimed batch to the publishing thread and keep it in flight. The claim
        has told the holder the batch's buckets are in flight
        (:meth:`.BucketHolder.sent`); :meth:`left` tells it they no longer are."""
        metrics.observe_batch(len(events))
        # Rows taken over from relays that stopped were charged an attempt each time; one
        # that has used them all is buried unpublished (it may be what stops relays).
        spent = [e for e in events if e.message.attempts >= self._max_attempts]
        batch = Batch(
            events[0].batch, events,
            publishing=[e for e in events if e.message.attempts < self._max_attempts],
            failures=[Failure(e, f"gave up after {e.message.attempts} attempts: its bucket "
                              "was taken over each time (the relay holding it stopped "
                              "before settling it)", dead=True, counts_attempt=False)
                      for e in spent],
        )
        if batch.publishing:
            batch.results = self._sender.submit(
                partial(self._publish, [e.message for e in batch.publishing]))
        self._batches.append(batch)

    def take_oldest(self) -> tuple[Batch, list[PublishResult]]:
        """The oldest batch and the broker's answers for it, once the publishing thread
        has them, for the caller to settle and then say it :meth:`left`. It stays in
        flight while the relay waits, so an interrupted wait still hands it back (see
        :meth:`abandon`). If there are no answers to be had, the batch
        is handed back and :class:`BrokerUnavailable` raised."""
        batch = self._batches[0]
        try:
            results = self._results(batch)
        except (BrokerUnavailable, LeasesLapsed):
            self.left(self._batches.popleft())  # handed back already
            raise
        self._batches.popleft()
        return batch, results

    def left(self, batch: Batch) -> None:
        """``batch`` is settled or handed back: its buckets need not stay this relay's
        for it any longer."""
        self._holder.settled(batch.buckets)

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
            if isinstance(exc, BrokerUnavailable | LeasesLapsed):
                raise
            raise BrokerUnavailable(f"publisher raised {type(exc).__name__}: {exc}") from exc

    def abandon(self) -> Iterator[Batch]:
        """Take every batch out, oldest first, cancelling those the publishing thread has
        not started: they will never be sent now. The caller hands each back before it
        asks for the next."""
        while self._batches:
            batch = self._batches.popleft()
            if batch.results is not None:
                batch.results.cancel()
            yield batch
            self.left(batch)
