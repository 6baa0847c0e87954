"""Relays share the work: each takes the fresh heads of its own part of the aggregates.

A relay acks a batch and claims the next in one transaction, so on its own it keeps every
aggregate it holds, and a second relay finds nothing free (measured: with 100 aggregates
and 2 or 4 relays, one relay published all 20,000 events). So the running relays of an
outbox check in with the relay registry (migration 0009) every
:data:`MAX_CHECK_IN_INTERVAL` seconds or more often; a relay seen within half a
``CLAIM_TIMEOUT`` counts as live. With N live relays, ordered by their random instance
names, the one at position k claims fresh heads only of the aggregates whose hash modulo
N is k (:class:`~.store.sql.Partition`); one relay alone claims as before.

The part is a preference, never a lock: every claim still takes only heads, under the
same row locks, so two relays whose views of the registry differ for a moment may both
try an aggregate and one of them gets it; order is kept as ever. Retries that fell due
and expired leases are anyone's. A relay that stops cleanly leaves the registry at once;
one that dies is dropped after half a ``CLAIM_TIMEOUT``, when its rows' leases are still
running, so its aggregates have moved by the time its leases expire.
"""

from __future__ import annotations

import logging
import uuid

from django.db import Error, connections

from ..store.registry import RelayRegistry
from ..store.sql import Partition
from .ticker import Ticker

logger = logging.getLogger(__name__)

#: The longest wait between check-ins: a relay that joins gets its part of the work
#: within about twice this.
MAX_CHECK_IN_INTERVAL = 2.0
#: Check-ins within which a relay must be seen to count as live, per ``CLAIM_TIMEOUT``.
LIVE_SHARE_OF_LEASE = 0.5


def partition_of(live: list[str], instance: str) -> Partition | None:
    """``instance``'s part among the ``live`` instances (in the registry's order); None
    when it is alone, or not among them (its check-ins are failing: it claims as one
    relay would, which stays correct)."""
    if len(live) < 2 or instance not in live:
        return None
    return Partition(len(live), live.index(instance))


class Membership:
    """This relay's row in the registry and its current :attr:`partition`, refreshed by
    each check-in: the first in :meth:`start`, the rest on a thread of its own."""

    def __init__(self, registry: RelayRegistry, relay_id: str, claim_timeout: float) -> None:
        self.registry = registry
        self.relay_id = relay_id
        self.instance = uuid.uuid4().hex
        self.live_for = claim_timeout * LIVE_SHARE_OF_LEASE
        #: The live relays at the last check-in (1 until one succeeds).
        self.relays = 1
        self.partition: Partition | None = None
        self._failing = False
        self._ticker = Ticker(f"eventferry-members-{relay_id}",
                              min(MAX_CHECK_IN_INTERVAL, self.live_for / 3),
                              self.check_in, registry.alias)

    def check_in(self) -> None:
        """Say this relay is alive and learn its part. A failure (the database away, or
        migration 0009 not applied) is logged once and leaves the relay claiming as if
        alone: correct, only not shared."""
        try:
            live = self.registry.check_in(self.instance, self.relay_id, self.live_for)
        except Error as exc:
            if not self._failing:
                logger.warning("[%s] could not check in with the relay registry (%s); "
                               "claiming as if alone until it answers", self.relay_id, exc)
            self._failing = True
            self.relays, self.partition = 1, None
            connections[self.registry.alias].close()
            return
        if self._failing or len(live) != self.relays:
            logger.info("[%s] %d relay(s) share the work", self.relay_id, len(live))
        self._failing = False
        self.relays, self.partition = len(live), partition_of(live, self.instance)

    def start(self) -> None:
        self.check_in()
        self._ticker.start()

    def stop(self) -> None:
        """Stop checking in and leave the registry, so the others take this relay's part
        at their next check-in."""
        self._ticker.stop()
        try:
            self.registry.leave(self.instance)
        except Error as exc:
            logger.info("[%s] could not leave the relay registry (%s); the others drop "
                        "this relay after %.0fs", self.relay_id, exc, self.live_for)
