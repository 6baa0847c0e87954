"""What a relay tells its operators: the start-up, progress and stop lines, each refused or
buried event, order breaks, fenced settlements and outages.

Everything goes to the ``eventferry_django.relay`` logger, the name users configure
(docs/operating.md). The events' fields also travel as the records' attributes, for
structured log handlers; nothing is formatted for a level that is off.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

from .. import metrics
from ..store.outbox import ClaimedEvent, Failure
from .planner import chains

logger = logging.getLogger("eventferry_django.relay")


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

    def add(self, result: PassResult, *, a_pass: bool = True) -> None:
        """Count ``result``; ``a_pass`` False for work done outside a pass (a settlement
        repeated after an outage)."""
        self.passes += 1 if a_pass else 0
        for counted in fields(PassResult):
            setattr(self, counted.name,
                    getattr(self, counted.name) + getattr(result, counted.name))


class RelayReporter:
    """Logs for one relay (``relay_id``); :meth:`progress` keeps the totals it last
    reported."""

    def __init__(self, relay_id: str, *, max_attempts: int, progress_interval: float
                 ) -> None:
        self.relay_id = relay_id
        self.max_attempts = max_attempts
        self.progress_interval = progress_interval
        self._progress_base = RelayStats()
        self._progress_since = 0.0

    def starting(self, description: str) -> None:
        logger.info("[%s] starting: %s", self.relay_id, description)

    def running(self, now: float) -> None:
        """The relay's loop (re)starts: the next progress line is due a full interval
        from ``now``."""
        self._progress_since = now

    def progress(self, stats: RelayStats, now: float) -> None:
        """Every ``progress_interval`` seconds, what the relay did since the last line; an
        idle relay stays quiet."""
        if now - self._progress_since < self.progress_interval:
            return
        last, since = self._progress_base, self._progress_since
        self._progress_since = now
        done = self._progress_base = replace(stats)
        claimed, errors = done.claimed - last.claimed, done.errors - last.errors
        if not (claimed or errors) or not logger.isEnabledFor(logging.INFO):
            return
        published = done.published - last.published
        logger.info(
            "[%s] %s published, %s retried, %s dead, %s released, %s outage(s) in the last "
            "%.0fs (%.1f events/s); %s published since start", self.relay_id,
            f"{published:,}", f"{done.retried - last.retried:,}", f"{done.dead - last.dead:,}",
            f"{done.released - last.released:,}", f"{errors:,}", now - since,
            published / max(now - since, 1e-9), f"{done.published:,}",
        )

    def stopped(self, stats: RelayStats) -> None:
        logger.info("[%s] stopped: %s published, %s retried, %s dead, %s released in %s "
                    "passes, %s outage(s)", self.relay_id, f"{stats.published:,}",
                    f"{stats.retried:,}", f"{stats.dead:,}", f"{stats.released:,}",
                    f"{stats.passes:,}", f"{stats.errors:,}")

    def outage(self, what: str, exc: BaseException, pause: float) -> None:
        logger.warning("[%s] %s unavailable (%s); retrying in %.1fs",
                       self.relay_id, what, exc, pause)

    def fenced(self, count: int) -> None:
        logger.warning("[%s] %d event(s) were taken over by another relay (this one's "
                       "bucket lease ran out) before this one settled them; their "
                       "outcome here was discarded", self.relay_id, count)

    def could_not_hand_back(self, exc: BaseException) -> None:
        logger.warning("[%s] could not settle or hand back claimed events (%s); another "
                       "relay takes them over when this one's bucket leases run out",
                       self.relay_id, exc)

    def failures(self, failures: Sequence[Failure]) -> None:
        """One line per refused event: ERROR when it went dead (someone has to look), INFO
        when it will be retried."""
        dead_on = logger.isEnabledFor(logging.ERROR)
        retry_on = logger.isEnabledFor(logging.INFO)
        for failure in failures:
            if not (dead_on if failure.dead else retry_on):
                continue
            message = failure.event.message
            attempt = message.attempts + (1 if failure.counts_attempt else 0)
            attributes = {
                "relay_id": self.relay_id, "outbox_id": message.id,
                "message_id": message.message_id, "topic": message.topic,
                "aggregate_type": message.aggregate_type, "aggregate_id": message.aggregate_id,
                "attempt": attempt, "error": failure.error,
            }
            if failure.dead:
                logger.error(
                    "[%s] event %s is dead after %d attempt(s): topic %s, aggregate %s/%s, "
                    "outbox row %d: %s", self.relay_id, message.message_id, attempt,
                    message.topic, message.aggregate_type, message.aggregate_id, message.id,
                    failure.error, extra=attributes,
                )
            else:
                logger.info(
                    "[%s] event %s failed attempt %d of %d, retrying in %.1fs: topic %s, "
                    "aggregate %s/%s, outbox row %d: %s", self.relay_id,
                    message.message_id, attempt, self.max_attempts, failure.delay,
                    message.topic, message.aggregate_type, message.aggregate_id, message.id,
                    failure.error, extra=attributes,
                )

    def order_breaks(self, events: Sequence[ClaimedEvent], failures: Sequence[Failure]
                     ) -> None:
        """Count and log each chain of ``events`` in which a row the broker confirmed
        follows one it refused: the later row reached consumers first."""
        refused = {f.event.id for f in failures}
        for aggregate, chain in chains(events).items():
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
                "%s of the same chain delivered before them", self.relay_id,
                message.aggregate_type, aggregate, skipped, later,
                extra={"relay_id": self.relay_id, "aggregate_type": message.aggregate_type,
                       "aggregate_id": aggregate, "topic": message.topic,
                       "refused_ids": skipped, "delivered_ids": later},
            )
