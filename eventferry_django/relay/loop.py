"""The relay: claim a batch, publish it, settle it; sleep only when there is nothing to do.

One pass costs one publisher call for the whole batch (the publisher pipelines it and
waits for broker confirms once) and one transaction that settles it and claims the next
batch, so neither a commit nor a broker round trip is paid per event, and the database
writes each event's row once after its INSERT: the settlement (docs/design/one-write.md).

The relay keeps ``BATCHES_IN_FLIGHT`` batches on the move (:mod:`.flight`): while its
publishing thread (:mod:`.sender`) hands one to the broker, the relay's thread settles
another (:mod:`.settlement`) and claims its successor (:mod:`.claimer`, which asks
:mod:`.planner` what to claim). It claims only from the buckets it holds leases on
(:mod:`.ownership`: the buckets :mod:`.membership` names as this relay's share, held by
:mod:`.bucket_holder`), and publishes nothing once those leases may have run out;
:mod:`.reporting` says what it does.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from types import FrameType

from django.db import Error, close_old_connections, connections

from .. import metrics
from ..conf import EventferrySettings, get_settings
from ..publishers.base import BrokerUnavailable, OutboundMessage, Publisher, PublishResult
from ..store.outbox import ClaimedEvent, OutboxStore
from .bucket_holder import LeasesLapsed
from .claimer import Claimer
from .config import RelayConfig, build_publisher
from .flight import Batch, InFlight
from .ownership import BucketOwnership
from .planner import ClaimPlanner, refused_heads_alone
from .reporting import PassResult, RelayReporter, RelayStats, logger
from .sender import Sender
from .settlement import Settler
from .waker import Waker

#: First idle sleep; it doubles on each empty pass up to the poll interval.
MIN_IDLE_SLEEP = 0.05
#: Longest pause after the database or broker failed.
MAX_ERROR_BACKOFF = 30.0
#: How long a relay that is told to exit at once waits for its publishing thread.
SENDER_EXIT_WAIT = 1.0


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
        self.stats = RelayStats()
        self.planner = ClaimPlanner(batch_size=config.batch_size,
                                    max_chain=self.store.max_chain,
                                    max_events=config.max_events)
        #: Batches a fresh start claims, one after the other.
        self.batches = 1 if config.once else config.batches_in_flight
        #: Buckets shared out where the vendor can, unless the relay drains and exits.
        drains = config.once or config.until_empty
        self.ownership = BucketOwnership(
            self.store, config,
            shares=self.store.dialect.features.shares_aggregates and not drains)
        self.holder = self.ownership.holder
        self.waker = Waker(self.store.alias, self.settings.table_name.notify_channel,
                           concerns=self.holder.claims_from)
        self._sleep = sleep or self.waker.sleep
        self.claimer = Claimer(self.store, self.planner, self.holder, self.stats)
        self.reporter = RelayReporter(config.relay_id, max_attempts=config.max_attempts,
                                      progress_interval=config.progress_interval)
        self._sender = Sender(f"eventferry-send-{config.relay_id}")
        # The settler hands back what the broker did not take; it is made just below.
        self.in_flight = InFlight(self._sender, self._publish, self.holder,
                                  publisher_name=type(self.publisher).__name__,
                                  max_attempts=config.max_attempts,
                                  hand_back=lambda batch: self.settler.hand_back(batch))
        self.settler = Settler(self.store, self.claimer, self.in_flight, self.reporter,
                               self.stats, max_attempts=config.max_attempts,
                               backoff=self.settings.backoff)
        self._stopping = False
        #: The name of the signal that asked the relay to stop; None until one comes.
        self._signalled: str | None = None
        self._announced = False

    # -- the loop ----------------------------------------------------------------------
    def run(self) -> RelayStats:
        """Pass after pass until stopped, ``--once``, ``--until-empty`` or ``--max-events``."""
        try:
            return self._run()
        except SystemExit:
            logger.warning("second %s: exited at once, handing the batches in flight back "
                           "(or leaving them to a takeover of their buckets)", self._signalled)
            raise

    def _run(self) -> RelayStats:
        # A relay that exits when idle never sleeps long enough to need waking.
        may_idle = not (self.config.once or self.config.until_empty)
        if may_idle:
            self.waker.start()
        idle_sleep, error_sleep = MIN_IDLE_SLEEP, self.config.error_backoff
        interrupted = True
        if not self._announced:
            self._announced = True
            self.reporter.starting(self.describe())
        self.reporter.running(time.monotonic())
        try:
            self.ownership.start()
            while not self._stopping:
                close_old_connections()
                try:
                    result = self.run_once()
                except LeasesLapsed as exc:
                    self._lapsed(exc)
                    continue
                # django.db.Error, the parent of DatabaseError and InterfaceError: pyodbc
                # raises SQLSTATE 40001 and generic HY000 errors as its base Error, which
                # Django wraps as neither.
                except (Error, BrokerUnavailable) as exc:
                    self._on_error(exc, error_sleep)
                    error_sleep = min(error_sleep * 2, MAX_ERROR_BACKOFF)
                    continue
                error_sleep = self.config.error_backoff
                self.stats.add(result)
                self.reporter.progress(self.stats, time.monotonic())
                if self._finished(result):
                    break
                if result.claimed == 0:
                    self._sleep(idle_sleep)
                    idle_sleep = min(idle_sleep * 2, self.config.poll_interval)
                else:
                    idle_sleep = MIN_IDLE_SLEEP
            if self._signalled is not None:
                logger.info("%s: finishing the batches in flight, then stopping (send it "
                            "again to exit at once)", self._signalled)
            interrupted = False
        finally:
            # The threads stop however the wind-down ends (a second signal can cut it
            # short): a membership left looking would keep a stopped relay live, its
            # buckets nobody's.
            try:
                self._wind_down(interrupted)
            finally:
                self.ownership.stop(release=not len(self.in_flight))
                if may_idle:
                    self.waker.stop()
            # A publishing thread still stuck with an unanswering broker keeps the
            # publisher; the process is on its way out then.
            if self._sender.close(SENDER_EXIT_WAIT if interrupted else None):
                self.publisher.close()
            self.reporter.stopped(self.stats)
        return self.stats

    def run_once(self) -> PassResult:
        """Settle the oldest batch in flight and, in the same transaction, claim the next
        one and send it. With nothing in flight, claim up to ``BATCHES_IN_FLIGHT``
        batches one after the other and send them all first. Raises on a database or
        broker outage (after handing back what the database allows), and
        :class:`LeasesLapsed` when the relay must not publish what it holds."""
        self.ownership.hold()
        self.settler.catch_up()
        if not len(self.in_flight):
            for _ in range(self.batches):
                _, events, _ = self.claimer.claim(in_flight=self.in_flight.aggregates,
                                                  rows_in_flight=self.in_flight.rows)
                if not events:
                    break
                self._launch(events)
            if not len(self.in_flight):
                return PassResult()
        try:
            batch, results = self.in_flight.take_oldest()
        except (BrokerUnavailable, LeasesLapsed):
            # The others went to the same broker; settle those it answered and hand back
            # the rest, so one outage costs one back-off.
            self._drain()
            raise
        return self._settle(batch, results, claim_next=not (self._stopping or self.config.once))

    # -- one pass ----------------------------------------------------------------------
    def _settle(self, batch: Batch, results: list[PublishResult], *, claim_next: bool
                ) -> PassResult:
        """Settle ``batch`` and, with ``claim_next``, claim and send the next one."""
        result, claimed, _ = self.settler.settle(batch, results, claim=claim_next)
        if claimed:
            self._launch(claimed)
        return result

    def _launch(self, events: list[ClaimedEvent]) -> None:
        """Send a claimed batch, less the rows behind a refused head: they stay pending,
        untouched, and its settlement takes them out of the journal with the rest."""
        publishing, _ = refused_heads_alone(events)
        self.in_flight.launch(publishing)

    def _drain(self) -> None:
        """Settle every batch in flight without claiming more; hand back those whose
        publication failed."""
        while len(self.in_flight):
            try:
                batch, results = self.in_flight.take_oldest()
            except (BrokerUnavailable, LeasesLapsed):
                continue
            self.stats.add(self._settle(batch, results, claim_next=False))

    def _publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        """Runs on the publishing thread; publishes nothing once the bucket leases may
        have run out (another relay may be publishing these rows by then)."""
        self.holder.check()
        started = time.perf_counter()
        results = self.publisher.publish(messages)
        metrics.observe_publish(time.perf_counter() - started)
        return results

    def _finished(self, result: PassResult) -> bool:
        if self.config.once:
            return True
        if self.config.until_empty and result.claimed == 0:
            return True
        return self.config.max_events is not None and self.stats.claimed >= self.config.max_events

    # -- outages and stopping ----------------------------------------------------------
    def _on_error(self, exc: Error | BrokerUnavailable, pause: float) -> None:
        self.stats.errors += 1
        database = isinstance(exc, Error)
        if database:
            self.settler.outage()
        self.reporter.outage("database" if database else "broker", exc, pause)
        if self.config.once:
            raise exc
        self._pause(pause)
        if database:
            connections[self.store.alias].close()

    def _lapsed(self, exc: LeasesLapsed) -> None:
        """The leases may have run out: what was in flight is handed back (or taken over
        already); take buckets anew."""
        self.stats.errors += 1
        logger.warning("%s; handed back what was in flight, taking buckets anew", exc)
        self.ownership.lapsed()
        self._pause(MIN_IDLE_SLEEP)

    def _pause(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stopping and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, 0.2))

    def _wind_down(self, interrupted: bool) -> None:
        """On the way out: settle what was published and the batches still in flight.
        Interrupted (a second signal, an error), the relay does not wait for the broker:
        batches in flight are handed back, to be published again. If the database is
        away, they wait in the journal for a takeover of their buckets."""
        try:
            self.settler.catch_up()
            if not interrupted:
                self._drain()
            for batch in self.in_flight.abandon():
                self.settler.hand_back(batch, counted=False)
        except Error as exc:
            self.reporter.could_not_hand_back(exc)

    def stop(self) -> None:
        """Finish the batch in hand, then return from :meth:`run`."""
        self._stopping = True
        self.waker.wake()

    def install_signal_handlers(self) -> None:
        """First SIGTERM/SIGINT: finish the batches in flight and stop, within a poll
        interval when idle. Second: exit at once.

        The handler runs on the relay's thread between two of its bytecodes, perhaps
        while that thread holds a lock that is not reentrant (its waker's, inside
        ``Event.clear``): taking one there would wait forever. So it only sets flags; the
        loop says what it does when it next looks."""

        def handle(signum: int, frame: FrameType | None) -> None:
            if self._signalled is not None:
                raise SystemExit(128 + signum)
            self._signalled = signal.Signals(signum).name
            self._stopping = True

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

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
