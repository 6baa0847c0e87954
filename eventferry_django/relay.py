"""The relay: claim a batch, publish it, settle it; sleep only when there is nothing to do.

One pass costs one claim (a short transaction), one publisher call for the whole batch
(the publisher pipelines it and waits for broker confirms once) and one ack statement, so
neither a commit nor a broker round trip is paid per event.

The relay keeps ``BATCHES_IN_FLIGHT`` batches on the move (two by default): while a
thread of its own (:mod:`.sender`) publishes one and waits for the broker's confirms,
the relay's thread settles another and claims its successors. Per-aggregate order does
not depend on this: the claim hands out an aggregate's rows only as one chain (its head
and up to ``MAX_CHAIN`` - 1 open rows after it, in id order) while no earlier row of it is
open elsewhere, and a chain is never split between batches, so batches in flight never
share an aggregate and each chain goes to the broker in one publisher call, in id order.

A chain whose middle row the broker refuses is settled row by row as the broker
answered: the rows it confirmed are done, before and after the refused one, and a
confirmed row after a refused one is an order break (counted and logged). A batch the
broker did not answer (an outage, a crash) is handed back whole, or comes back when its
lease expires, and is published again from its first row.

Failures are sorted by whose fault they are:
- the message's (the publisher answers RETRY or GIVE_UP): an attempt is spent, the row is
  retried with backoff and goes dead after ``MAX_ATTEMPTS``;
- the broker's (the publisher raises): the batch is handed back untouched and the relay
  backs off; an outage never spends attempts, so it never turns an event dead;
- the database's: the relay drops the connection, backs off and carries on.

Slowness is none of these: while the relay holds rows (claimed, publishing, settling) a
:class:`~.leases.LeaseKeeper` renews their leases, so only a relay that stopped loses
them, and only then is an attempt spent on them.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, fields, replace
from functools import partial
from types import FrameType
from typing import Any

from django.db import Error, close_old_connections, connections
from django.utils.module_loading import import_string

from . import metrics
from .conf import EventferrySettings, get_settings
from .leases import LeaseKeeper
from .publishers.base import (
    BrokerUnavailable,
    OutboundMessage,
    Outcome,
    Publisher,
    PublishResult,
)
from .recent_settlements import RecentSettlements, Settlement
from .retry import retry_delay
from .sender import Sender
from .store.outbox import ClaimedEvent, Failure, OutboxStore
from .store.statistics import StatisticsKeeper
from .waker import Waker

logger = logging.getLogger(__name__)

#: First idle sleep; it doubles on each empty pass up to the poll interval.
MIN_IDLE_SLEEP = 0.05
#: Longest pause after the database or broker failed.
MAX_ERROR_BACKOFF = 30.0
#: How often a relay asks for a full batch while short claims keep its limit down. Each
#: such refresh that finds nothing more doubles the wait before the next, up to the
#: maximum; new commits bring it back to the minimum.
MIN_LIMIT_REFRESH_INTERVAL = 1.0
MAX_LIMIT_REFRESH_INTERVAL = 8.0
#: How long a relay that is told to exit at once waits for its publishing thread.
SENDER_EXIT_WAIT = 1.0
#: Seconds between the progress lines a working relay logs at INFO.
PROGRESS_INTERVAL = 60.0


def default_relay_id() -> str:
    """``host:pid``: what a relay is called in logs unless it is given a name."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _chains(events: Sequence[ClaimedEvent]) -> dict[str, list[ClaimedEvent]]:
    """``events`` by aggregate, each list in id order, the aggregates in the order of their
    first event."""
    chains: dict[str, list[ClaimedEvent]] = {}
    for event in sorted(events, key=lambda e: e.id):
        chains.setdefault(event.message.aggregate_id, []).append(event)
    return chains


def _aggregates(events: Sequence[ClaimedEvent]) -> int:
    """How many aggregates (heads) a claim found."""
    return len({event.message.aggregate_id for event in events})


def build_publisher(settings: EventferrySettings | None = None) -> Publisher:
    """The publisher named in ``EVENTFERRY["PUBLISHER"]``, built with its OPTIONS."""
    config = (settings or get_settings()).publisher
    publisher_class = import_string(config.backend)
    return publisher_class(**config.options)  # type: ignore[no-any-return]


@dataclass
class PassResult:
    """What one pass (the settlement of one batch) did."""

    claimed: int = 0
    published: int = 0
    retried: int = 0
    dead: int = 0
    fenced: int = 0


@dataclass
class RelayStats(PassResult):
    """Totals over a relay's run."""

    passes: int = 0
    released: int = 0
    errors: int = 0

    def add(self, result: PassResult) -> None:
        self.passes += 1
        for counted in fields(PassResult):
            setattr(self, counted.name,
                    getattr(self, counted.name) + getattr(result, counted.name))


@dataclass
class RelayConfig:
    batch_size: int
    poll_interval: float = 1.0
    claim_timeout: float = 60.0
    max_attempts: int = 5
    batches_in_flight: int = 2
    relay_id: str = field(default_factory=default_relay_id)
    once: bool = False
    until_empty: bool = False
    max_events: int | None = None
    #: First pause after a database or broker failure; it doubles up to 30 s.
    error_backoff: float = 0.5
    #: Seconds between progress lines at INFO, logged while the relay has work.
    progress_interval: float = PROGRESS_INTERVAL

    @property
    def mode(self) -> str:
        """When :meth:`Relay.run` returns, in words."""
        mode = ("after one pass" if self.once else "when nothing is claimable"
                if self.until_empty else "when stopped")
        if self.max_events is not None:
            mode += f" or after {self.max_events:,} events"
        return mode

    @classmethod
    def from_settings(cls, settings: EventferrySettings | None = None, **overrides: Any
                      ) -> RelayConfig:
        """Defaults from ``EVENTFERRY``; keyword arguments override them."""
        settings = settings or get_settings()
        values: dict[str, Any] = {
            "batch_size": settings.batch_size,
            "batches_in_flight": settings.batches_in_flight,
            "claim_timeout": settings.claim_timeout,
            "max_attempts": settings.max_attempts,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


@dataclass
class _Batch:
    """A claimed batch on its way through the broker."""

    events: list[ClaimedEvent]
    #: The events handed to the publisher, in the order of its results.
    publishing: list[ClaimedEvent]
    #: Rows buried unpublished, to record with the batch's settlement.
    failures: list[Failure] = field(default_factory=list)
    #: The publisher's results, once it has them; None when nothing is published.
    results: Future[list[PublishResult]] | None = None


class Relay:
    """Drives the store and a publisher; the ``outbox_relay`` command is a thin face on it."""

    def __init__(
        self,
        config: RelayConfig,
        *,
        store: OutboxStore | None = None,
        publisher: Publisher | None = None,
        settings: EventferrySettings | None = None,
        sleep: Callable[[float], bool] | None = None,
    ) -> None:
        self.settings = settings or get_settings()
        self.config = config
        self.store = store or OutboxStore()
        self.publisher = publisher or build_publisher(self.settings)
        self._sender = Sender(f"eventferry-send-{config.relay_id}")
        self.leases = LeaseKeeper(self.store, config.claim_timeout,
                                  name=f"eventferry-lease-{config.relay_id}")
        #: Refreshes the planner's statistics when a claim shows them stale (after a
        #: database restart they can stay those of an empty queue while a backlog waits).
        self.statistics = StatisticsKeeper(self.store)
        #: Settled lately, settled again after a database outage (which may have lost
        #: the commits: see :mod:`.recent_settlements`).
        self._recent = RecentSettlements()
        self.waker = Waker(self.store.alias, self.settings.table_name.notify_channel)
        self._sleep = sleep or self.waker.sleep
        self.stats = RelayStats()
        self._stopping = False
        self._rng = random.Random()
        #: Batches handed to the publisher and not settled yet, oldest first.
        self._in_flight: deque[_Batch] = deque()
        #: Whether the claim made with the last settlement found nothing, so the next
        #: pass has nothing to do and need not ask again at once.
        self._found_nothing = False
        #: A published batch whose settlement failed, to settle before anything else.
        self._leftovers: tuple[list[ClaimedEvent], list[Failure]] | None = None
        self._limit = config.batch_size
        self._refresh_interval = MIN_LIMIT_REFRESH_INTERVAL
        self._refresh_at = 0.0
        #: When the next claim asks for the full batch: the limit it is tested against
        #: (the first claim finds out from nothing).
        self._refreshing_from: int | None = 0
        self._wakeups_seen = 0
        self._announced = False
        #: The totals at the last progress line, and when the next one is due.
        self._progress_base = RelayStats()
        self._progress_since = time.monotonic()

    # -- one pass ----------------------------------------------------------------------
    def run_once(self) -> PassResult:
        """Settle the oldest batch in flight and, in the same transaction, claim the next
        one and send it. With nothing in flight, claim afresh, split the claim across the
        batches in flight and send them all first. Raises on a database or broker outage
        (after handing back what the database allows)."""
        self._repeat_recent_settlements()
        self._settle_leftovers()
        if not self._in_flight:
            found_nothing, self._found_nothing = self._found_nothing, False
            started = time.perf_counter()
            events = [] if found_nothing else self._claim()
            if not events:
                return PassResult()
            self._launch(self._split(events), claimed_in=time.perf_counter() - started)
        try:
            batch, results = self._oldest_results()
        except BrokerUnavailable:
            # The others went to the same broker; settle those it answered and hand back
            # the rest, so one outage costs one back-off.
            self._drain()
            raise
        return self._settle(batch, results, claim_next=not (self._stopping or self.config.once))

    def _claim(self) -> list[ClaimedEvent]:
        limit, heads = self._claim_limit()
        if not limit:
            return []
        started = time.perf_counter()
        events = self.store.claim(limit, self.config.claim_timeout, heads=heads)
        claimed_in = time.perf_counter() - started
        metrics.observe_claim(claimed_in)
        self._adapt_limit(heads, _aggregates(events))
        self.statistics.maybe_refresh(len(events), claimed_in)
        return events

    def _split(self, events: list[ClaimedEvent]) -> list[list[ClaimedEvent]]:
        """A fresh claim, cut into as many batches as may be in flight, each chain whole
        (publishing one chain in two calls would let its end out while its start waits).
        Afterwards each settlement claims the successors of its own batch's aggregates
        (the others' are still in flight), so the batches stay apart."""
        parts = 1 if self.config.once else min(self.config.batches_in_flight, len(events))
        size = -(-len(events) // parts)
        batches: list[list[ClaimedEvent]] = [[]]
        for chain in _chains(events).values():
            if len(batches[-1]) >= size and len(batches) < parts:
                batches.append([])
            batches[-1].extend(chain)
        return [sorted(batch, key=lambda event: event.id) for batch in batches]

    def _launch(self, parts: list[list[ClaimedEvent]], *, claimed_in: float) -> None:
        """Hand each batch to the publishing thread and keep it in flight (and its leases
        renewed); ``claimed_in`` is how long the claim took."""
        for events in parts:
            self.leases.hold(events, claimed_in=claimed_in)
            metrics.observe_batch(len(events))
            # Rows taken back from dead relays were charged an attempt at claim time; one
            # that has used them all is buried unpublished (it may be what kills relays).
            spent = [e for e in events if e.message.attempts >= self.config.max_attempts]
            batch = _Batch(
                events,
                publishing=[e for e in events if e.message.attempts < self.config.max_attempts],
                failures=[Failure(e, f"gave up after {e.message.attempts} attempts: the lease "
                                  "expired each time (the relay holding it stopped before "
                                  "settling it)", dead=True, counts_attempt=False)
                          for e in spent],
            )
            if batch.publishing:
                batch.results = self._sender.submit(
                    partial(self._publish, [e.message for e in batch.publishing]))
            self._in_flight.append(batch)

    def _settle(self, batch: _Batch, results: list[PublishResult], *, claim_next: bool
                ) -> PassResult:
        """Ack the delivered, record the refused and, with ``claim_next``, claim and send
        the next batch: one transaction, one commit."""
        failures = list(batch.failures)
        delivered: list[ClaimedEvent] = []
        for event, outcome in zip(batch.publishing, results, strict=True):
            if outcome.outcome is Outcome.OK:
                delivered.append(event)
            else:
                failures.append(self._failure(event, outcome))
        in_flight = len(batch.events) + sum(len(b.events) for b in self._in_flight)
        next_limit, next_heads = self._claim_limit(already=in_flight) if claim_next else (0, 0)
        started = time.perf_counter()
        try:
            settled, claimed = self.store.settle(
                delivered, failures, claim_next=next_limit, claim_heads=next_heads,
                lease_timeout=self.config.claim_timeout,
            )
        except Error:
            # Published but not settled: settle it first thing next pass, so a database
            # hiccup does not leave the batch to its lease (and a second publication).
            self._leftovers = (delivered, failures)
            raise
        settled_in = time.perf_counter() - started
        self._recent.record(Settlement(delivered, failures))
        self.leases.let_go(batch.events)
        metrics.observe_settle(settled_in)
        metrics.count_outcomes((e.message.topic for e in delivered),
                               ((f.event.message.topic, f.dead) for f in failures))
        if failures:
            self._log_failures(failures)
            self._count_order_breaks(batch.events, failures)
        if next_limit:
            self._adapt_limit(next_heads, _aggregates(claimed))
            if claimed:
                self._launch([claimed], claimed_in=settled_in)
            self._found_nothing = not claimed
            self.statistics.maybe_refresh(len(claimed), settled_in)
        result = PassResult(claimed=len(batch.events), published=len(delivered))
        result.dead = sum(1 for f in failures if f.dead)
        result.retried = len(failures) - result.dead
        result.fenced = len(batch.events) - settled
        if result.fenced:
            logger.warning("[%s] %d event(s) were taken back by another relay (or their "
                           "claim was lost in a database crash) before this one settled "
                           "them; their outcome here was discarded",
                           self.config.relay_id, result.fenced)
        return result

    def _drain(self) -> None:
        """Settle every batch in flight without claiming more; hand back those whose
        publication failed."""
        while self._in_flight:
            try:
                batch, results = self._oldest_results()
            except BrokerUnavailable:
                continue
            self.stats.add(self._settle(batch, results, claim_next=False))

    def _oldest_results(self) -> tuple[_Batch, list[PublishResult]]:
        """Take the oldest batch in flight once the publisher has answered for it. It
        stays in flight while the relay waits, so an interrupted wait still hands it back
        (see :meth:`_wind_down`)."""
        batch = self._in_flight[0]
        try:
            results = self._results(batch)
        except BrokerUnavailable:
            self._in_flight.popleft()  # handed back already
            raise
        self._in_flight.popleft()
        return batch, results

    def _repeat_recent_settlements(self) -> None:
        """After a database outage, settle again what was settled just before it: a
        commit the outage lost would leave rows claimed with nobody renewing them. Rows
        settled for good (or taken by another relay since) match nothing."""
        for settlement in self._recent.to_repeat:
            self.store.settle(settlement.delivered, settlement.failures)
            self.store.release(settlement.released)
        self._recent.repeated()

    def _settle_leftovers(self) -> None:
        """Settle a batch whose settlement failed last pass. Rows whose lease has run out
        meanwhile are fenced off and left to whoever holds them now."""
        if self._leftovers is None:
            return
        delivered, failures = self._leftovers
        self.store.settle(delivered, failures)
        self._leftovers = None
        self._recent.record(Settlement(delivered, failures))
        self.leases.let_go([*delivered, *(f.event for f in failures)])
        dead = sum(1 for f in failures if f.dead)
        self.stats.published += len(delivered)
        self.stats.dead += dead
        self.stats.retried += len(failures) - dead
        metrics.count_outcomes((e.message.topic for e in delivered),
                               ((f.event.message.topic, f.dead) for f in failures))
        if failures:
            self._log_failures(failures)
            self._count_order_breaks([*delivered, *(f.event for f in failures)], failures)

    def _claim_limit(self, already: int = 0) -> tuple[int, int]:
        """How many rows to ask for, within ``--max-events``, and how many heads: the
        adaptive limit. Heads only (``MAX_CHAIN`` 1), both are the adaptive limit."""
        rows = self._limit if self.store.max_chain == 1 else self.config.batch_size
        if self.config.max_events is not None:
            rows = min(rows, self.config.max_events - self.stats.claimed - already)
        rows = max(0, rows)
        return rows, min(rows, self._limit)

    def _adapt_limit(self, asked: int, claimed: int) -> None:
        """Ask for no more heads (aggregates) than the last claim found.

        A claim that finds fewer claimable rows than it asks for scans every open row to
        be sure, and a backlog queued behind few aggregates makes that scan long, pass
        after pass. So after a short claim the relay asks for exactly what it found,
        which stops the scan early. It asks for the full batch again when it was idle,
        and now and then (see :data:`MIN_LIMIT_REFRESH_INTERVAL`) to pick up aggregates
        that became claimable meanwhile: due retries, expired leases, new aggregates.
        Those refreshes are full scans, so they grow rarer while they find nothing.
        """
        now = time.monotonic()
        if self._refreshing_from is not None:
            found_more = claimed > self._refreshing_from
            self._refresh_interval = MIN_LIMIT_REFRESH_INTERVAL if found_more else min(
                self._refresh_interval * 2, MAX_LIMIT_REFRESH_INTERVAL)
            self._refresh_at = now + self._refresh_interval
            self._refreshing_from = None
        if self.waker.wakeups != self._wakeups_seen:
            self._wakeups_seen = self.waker.wakeups
            self._refresh_interval = MIN_LIMIT_REFRESH_INTERVAL
            self._refresh_at = min(self._refresh_at, now + MIN_LIMIT_REFRESH_INTERVAL)
        if claimed == 0:
            self._limit = self.config.batch_size
            self._refreshing_from = 0
        elif now >= self._refresh_at:
            self._refreshing_from = min(claimed, self._limit)
            self._limit = self.config.batch_size
        elif claimed < asked:
            self._limit = claimed

    def _publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        """Runs on the publishing thread."""
        started = time.perf_counter()
        results = self.publisher.publish(messages)
        metrics.observe_publish(time.perf_counter() - started)
        return results

    def _results(self, batch: _Batch) -> list[PublishResult]:
        """The broker's answers for ``batch``, once the publishing thread has them; if
        there are none to be had, the batch is handed back and
        :class:`BrokerUnavailable` raised."""
        if batch.results is None:
            return []
        try:
            results = batch.results.result()
            if len(results) != len(batch.publishing):
                raise BrokerUnavailable(
                    f"{type(self.publisher).__name__} answered {len(results)} results "
                    f"for {len(batch.publishing)} messages"
                )
            return results
        except Exception as exc:
            # Not the messages' fault as far as we can tell: hand them back unspent. The
            # batch leaves the relay even if the database refuses that (their leases
            # bring them back then), so nothing renews its rows any longer.
            try:
                self.store.release(batch.publishing)
                self._recent.record(Settlement(released=batch.publishing))
            finally:
                self.leases.let_go(batch.events)
            self.stats.released += len(batch.publishing)
            if isinstance(exc, BrokerUnavailable):
                raise
            raise BrokerUnavailable(f"publisher raised {type(exc).__name__}: {exc}") from exc

    def _count_order_breaks(self, events: Sequence[ClaimedEvent], failures: Sequence[Failure]
                            ) -> None:
        """Count and log each chain of ``events`` in which a row the broker confirmed
        follows one it refused: the later row reached consumers first."""
        refused = {f.event.id for f in failures}
        for aggregate, chain in _chains(events).items():
            first = next((i for i, e in enumerate(chain) if e.id in refused), None)
            if first is None:
                continue
            later = [e.id for e in chain[first + 1:] if e.id not in refused]
            if not later:
                continue
            message = chain[first].message
            metrics.count_order_break(message.topic)
            skipped = [e.id for e in chain[first:] if e.id in refused and e.id < later[-1]]
            logger.warning(
                "[%s] order break in aggregate %s/%s: outbox row(s) %s refused, later row(s) "
                "%s of the same chain delivered before them", self.config.relay_id,
                message.aggregate_type, aggregate, skipped, later,
                extra={"relay_id": self.config.relay_id, "aggregate_type":
                       message.aggregate_type, "aggregate_id": aggregate, "topic": message.topic,
                       "refused_ids": skipped, "delivered_ids": later},
            )

    def _log_failures(self, failures: Sequence[Failure]) -> None:
        """One line per refused event: ERROR when it went dead (someone has to look), INFO
        when it will be retried. The fields also travel as the records' attributes, for
        structured log handlers. Nothing is formatted for a level that is off."""
        dead_on = logger.isEnabledFor(logging.ERROR)
        retry_on = logger.isEnabledFor(logging.INFO)
        for failure in failures:
            if not (dead_on if failure.dead else retry_on):
                continue
            message = failure.event.message
            attempt = message.attempts + (1 if failure.counts_attempt else 0)
            attributes = {
                "relay_id": self.config.relay_id, "outbox_id": message.id,
                "message_id": message.message_id, "topic": message.topic,
                "aggregate_type": message.aggregate_type, "aggregate_id": message.aggregate_id,
                "attempt": attempt, "error": failure.error,
            }
            if failure.dead:
                logger.error(
                    "[%s] event %s is dead after %d attempt(s): topic %s, aggregate %s/%s, "
                    "outbox row %d: %s", self.config.relay_id, message.message_id, attempt,
                    message.topic, message.aggregate_type, message.aggregate_id, message.id,
                    failure.error, extra=attributes,
                )
            else:
                logger.info(
                    "[%s] event %s failed attempt %d of %d, retrying in %.1fs: topic %s, "
                    "aggregate %s/%s, outbox row %d: %s", self.config.relay_id,
                    message.message_id, attempt, self.config.max_attempts, failure.delay,
                    message.topic, message.aggregate_type, message.aggregate_id, message.id,
                    failure.error, extra=attributes,
                )

    def describe(self) -> str:
        """Where this relay reads from and publishes to, and how: its start-up line."""
        config, alias = self.config, self.store.alias
        return (
            f"database {alias!r} ({connections[alias].vendor}), table "
            f"{self.store.dialect.table}, publisher {self.publisher.describe()}, batch size "
            f"{config.batch_size}, {config.batches_in_flight} batch(es) in flight, claim "
            f"timeout {config.claim_timeout:g}s, max attempts {config.max_attempts}, poll "
            f"interval {config.poll_interval:g}s; returns {config.mode}"
        )

    def _log_progress(self, now: float) -> None:
        """Every ``progress_interval`` seconds, what the relay did since the last line; an
        idle relay stays quiet."""
        last, since = self._progress_base, self._progress_since
        self._progress_since = now
        done = self._progress_base = replace(self.stats)
        claimed, errors = done.claimed - last.claimed, done.errors - last.errors
        if not (claimed or errors) or not logger.isEnabledFor(logging.INFO):
            return
        published = done.published - last.published
        logger.info(
            "[%s] %s published, %s retried, %s dead, %s released, %s outage(s) in the last "
            "%.0fs (%.1f events/s); %s published since start", self.config.relay_id,
            f"{published:,}", f"{done.retried - last.retried:,}", f"{done.dead - last.dead:,}",
            f"{done.released - last.released:,}", f"{errors:,}", now - since,
            published / max(now - since, 1e-9), f"{done.published:,}",
        )

    def _failure(self, event: ClaimedEvent, result: PublishResult) -> Failure:
        attempts = event.message.attempts + 1
        error = result.error or f"publisher answered {result.outcome.value}"
        if result.outcome is Outcome.GIVE_UP or attempts >= self.config.max_attempts:
            return Failure(event, error, dead=True)
        return Failure(event, error, delay=retry_delay(attempts, self.settings.backoff, self._rng))

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> RelayStats:
        """Pass after pass until stopped, ``--once``, ``--until-empty`` or ``--max-events``."""
        # A relay that exits when idle never sleeps long enough to need waking.
        may_idle = not (self.config.once or self.config.until_empty)
        if may_idle:
            self.waker.start()
        self.leases.start()
        idle_sleep = MIN_IDLE_SLEEP
        error_sleep = self.config.error_backoff
        interrupted = True
        if not self._announced:
            self._announced = True
            logger.info("[%s] starting: %s", self.config.relay_id, self.describe())
        self._progress_since = time.monotonic()
        try:
            while not self._stopping:
                close_old_connections()
                try:
                    result = self.run_once()
                # django.db.Error, the parent of DatabaseError and InterfaceError: pyodbc
                # raises SQLSTATE 40001 and generic HY000 errors as its base Error, which
                # Django wraps as neither.
                except Error as exc:
                    self._recent.outage()
                    self._on_error("database", exc, error_sleep)
                    connections[self.store.alias].close()
                    error_sleep = min(error_sleep * 2, MAX_ERROR_BACKOFF)
                    continue
                except BrokerUnavailable as exc:
                    self._on_error("broker", exc, error_sleep)
                    error_sleep = min(error_sleep * 2, MAX_ERROR_BACKOFF)
                    continue
                error_sleep = self.config.error_backoff
                self.stats.add(result)
                now = time.monotonic()
                if now - self._progress_since >= self.config.progress_interval:
                    self._log_progress(now)
                if self._finished(result):
                    break
                if result.claimed == 0:
                    self._sleep(idle_sleep)
                    idle_sleep = min(idle_sleep * 2, self.config.poll_interval)
                else:
                    idle_sleep = MIN_IDLE_SLEEP
            interrupted = False
        finally:
            self._wind_down(interrupted)
            self.leases.stop()
            if may_idle:
                self.waker.stop()
            # A publishing thread still stuck with an unanswering broker keeps the
            # publisher; the process is on its way out then.
            if self._sender.close(SENDER_EXIT_WAIT if interrupted else None):
                self.publisher.close()
            stats = self.stats
            logger.info("[%s] stopped: %s published, %s retried, %s dead, %s released in %s "
                        "passes, %s outage(s)", self.config.relay_id, f"{stats.published:,}",
                        f"{stats.retried:,}", f"{stats.dead:,}", f"{stats.released:,}",
                        f"{stats.passes:,}", f"{stats.errors:,}")
        return self.stats

    def _wind_down(self, interrupted: bool) -> None:
        """On the way out: settle what was published and the batches still in flight.
        Interrupted (a second signal, an error), the relay does not wait for the broker:
        batches in flight are handed back, to be published again. If the database is
        away, the leases bring them back."""
        try:
            self._settle_leftovers()
            if not interrupted:
                self._drain()
            while self._in_flight:
                batch = self._in_flight.popleft()
                if batch.results is not None:
                    batch.results.cancel()  # not published yet: it never will be now
                self.store.release(batch.publishing)
                self.leases.let_go(batch.events)
        except Error as exc:
            logger.warning("[%s] could not settle or hand back claimed events (%s); they "
                           "return when their lease expires", self.config.relay_id, exc)

    def _finished(self, result: PassResult) -> bool:
        if self.config.once:
            return True
        if self.config.until_empty and result.claimed == 0:
            return True
        return self.config.max_events is not None and self.stats.claimed >= self.config.max_events

    def _on_error(self, what: str, exc: BaseException, pause: float) -> None:
        self.stats.errors += 1
        logger.warning("[%s] %s unavailable (%s); retrying in %.1fs",
                       self.config.relay_id, what, exc, pause)
        if self.config.once:
            raise exc
        self._pause(pause)

    def _pause(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stopping and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.2))

    # -- stopping ----------------------------------------------------------------------
    def stop(self) -> None:
        """Finish the batch in hand, then return from :meth:`run`."""
        self._stopping = True
        self.waker.wake()

    def install_signal_handlers(self) -> None:
        """First SIGTERM/SIGINT: finish the batch and stop. Second: exit at once."""

        def handle(signum: int, frame: FrameType | None) -> None:
            if self._stopping:
                logger.warning("second %s: exiting now", signal.Signals(signum).name)
                raise SystemExit(128 + signum)
            logger.info("%s: finishing the current batch, then stopping "
                        "(send it again to exit at once)", signal.Signals(signum).name)
            self.stop()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)
