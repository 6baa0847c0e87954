"""Settling what the broker answered: the delivered acked, the refused retried or buried,
in one transaction with the next claim; and the accounting of every outcome, in one place.

Failures are sorted by whose fault they are:
- the message's (the publisher answers RETRY or GIVE_UP): an attempt is spent, the row is
  retried with backoff (:mod:`.retry`) and goes dead after ``MAX_ATTEMPTS``;
- the broker's (the publisher raises): the batch is handed back, its rows untouched; an
  outage never spends attempts, so it never turns an event dead;
- the database's: a settlement that failed is run again first thing next pass, and after
  an outage the last settlements are run again too (a crash may have lost their commits:
  see :mod:`.recent_settlements`).

A chain whose middle row the broker refuses is settled row by row as the broker
answered: the rows it confirmed are done, before and after the refused one, and a
confirmed row after a refused one is an order break (counted and logged).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from django.db import Error

from .. import metrics
from ..conf import Backoff
from ..publishers.base import Outcome, PublishResult
from ..store.outbox import ClaimedEvent, Failure, OutboxStore, Settlement
from .claimer import Claimer
from .flight import Batch, InFlight
from .recent_settlements import RecentSettlements
from .reporting import PassResult, RelayReporter, RelayStats
from .retry import retry_delay


class Settler:
    """Settles one relay's batches in its store; counts the outcomes into ``stats``."""

    def __init__(self, store: OutboxStore, claimer: Claimer, in_flight: InFlight,
                 reporter: RelayReporter, stats: RelayStats, *, max_attempts: int,
                 backoff: Backoff) -> None:
        self.store = store
        self.claimer = claimer
        self.in_flight = in_flight
        self.reporter = reporter
        self.stats = stats
        self.max_attempts = max_attempts
        self.backoff = backoff
        self._rng = random.Random()
        #: A published batch whose settlement failed, to settle before anything else.
        self._leftover: Settlement | None = None
        #: Settled lately, settled again after a database outage.
        self.recent = RecentSettlements()

    def settle(self, batch: Batch, results: list[PublishResult], *, claim: bool
               ) -> tuple[PassResult, list[ClaimedEvent], float]:
        """Ack the delivered, record the refused and, with ``claim``, claim the next batch,
        passing over the aggregates of the batches still in flight: one transaction, one
        commit. Returns what the pass did, the new claim and how long the transaction
        took. If the database fails, the settlement is kept for :meth:`catch_up`."""
        settlement = self._sorted(batch, results)
        try:
            settled, claimed, settled_in = self.claimer.claim(
                settlement, in_flight=self.in_flight.aggregates,
                rows_in_flight=self.in_flight.rows, settling=len(batch.events), claim=claim)
        except Error:
            # Published but not settled: settle it first thing next pass, so a database
            # hiccup does not leave the batch to a takeover (and a second publication).
            self._leftover = settlement
            self.in_flight.left(batch)
            raise
        self.recent.record(settlement)
        self.in_flight.left(batch)
        metrics.observe_settle(settled_in)
        result = self._account(settlement, batch.events)
        result.claimed = len(batch.events)
        result.fenced = len(settlement.delivered) + len(settlement.failures) - settled
        if result.fenced:
            self.reporter.fenced(result.fenced)
        return result, claimed, settled_in

    def catch_up(self) -> None:
        """Settle again what an outage may have undone, then the settlement that failed
        last pass, counting its outcomes into ``stats`` (outside any pass). What was
        settled for good, or taken over by another relay meanwhile, is left alone.
        Costs nothing when there is nothing to catch up, as on almost every pass."""
        if self.recent.to_repeat:
            for settlement in self.recent.to_repeat:
                self.store.settle(settlement)
            self.recent.repeated()
        if self._leftover is None:
            return
        settlement = self._leftover
        self.store.settle(settlement)
        self._leftover = None
        self.recent.record(settlement)
        events = [*settlement.delivered, *(f.event for f in settlement.failures)]
        self.stats.add(self._account(settlement, events), a_pass=False)

    def hand_back(self, batch: Batch, *, counted: bool = True) -> None:
        """Return a batch's rows unspent (its publication failed, or the relay is
        leaving): they stay pending, and the batch leaves the journal. Kept among the
        recent settlements first, so a hand-back the database refuses or loses is run
        again after the outage. The caller tells :class:`.InFlight` the batch
        :meth:`~.InFlight.left`."""
        settlement = Settlement(batch.number)
        self.recent.record(settlement)
        self.store.settle(settlement)
        if counted:
            self.stats.released += len(batch.publishing)

    def outage(self) -> None:
        """The database failed: what it may have lost is settled again next pass."""
        self.recent.outage()

    def _sorted(self, batch: Batch, results: list[PublishResult]) -> Settlement:
        failures = list(batch.failures)
        delivered: list[ClaimedEvent] = []
        for event, outcome in zip(batch.publishing, results, strict=True):
            if outcome.outcome is Outcome.OK:
                delivered.append(event)
            else:
                failures.append(self._failure(event, outcome))
        return Settlement(batch.number, delivered, failures)

    def _failure(self, event: ClaimedEvent, result: PublishResult) -> Failure:
        attempts = event.message.attempts + 1
        error = result.error or f"publisher answered {result.outcome.value}"
        if result.outcome is Outcome.GIVE_UP or attempts >= self.max_attempts:
            return Failure(event, error, dead=True)
        return Failure(event, error, delay=retry_delay(attempts, self.backoff, self._rng))

    def _account(self, settlement: Settlement, events: Sequence[ClaimedEvent]) -> PassResult:
        """Metrics and logs of a settlement's outcomes, and their counts."""
        delivered, failures = settlement.delivered, settlement.failures
        metrics.count_outcomes((e.message.topic for e in delivered),
                               ((f.event.message.topic, f.dead) for f in failures))
        if failures:
            self.reporter.failures(failures)
            self.reporter.order_breaks(events, failures)
        dead = sum(1 for f in failures if f.dead)
        return PassResult(published=len(delivered), retried=len(failures) - dead, dead=dead)
