"""Lease renewal: however slow a live relay is, its rows never look abandoned.

A claim leases its rows for ``CLAIM_TIMEOUT``. A relay that stops renewing them (killed,
frozen, cut off from the database) loses them to another relay, which counts an attempt
when it takes them back: that is how an event that kills every relay that takes it ends
dead. A relay that is only slow (a broker or publisher taking its time, a settlement
waiting on a lock, a claim badly planned) must not look like that, or slowness would
spend attempts and turn events dead. So a :class:`LeaseKeeper` renews every lease its
relay holds, ``RENEWALS_PER_LEASE`` times per ``CLAIM_TIMEOUT``, from a thread and a
database connection of its own, until the rows are settled or handed back.

Renewing moves a row's expiry (``next_retry_at``), never its lease token
(``claimed_at``), so a settlement that runs at the same moment still matches its rows,
and a relay whose rows really were taken back still cannot settle them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from django.db import Error, connections

from ..store.outbox import ClaimedEvent, OutboxStore
from .ticker import Ticker

logger = logging.getLogger(__name__)

#: Renewals per lease: a lease is renewed with two thirds of it still to run, so one
#: renewal can fail (a database hiccup) and the next still comes in time.
RENEWALS_PER_LEASE = 3


class LeaseKeeper:
    """Holds the rows a relay has claimed and renews their leases until it lets go.

    :meth:`hold` and :meth:`let_go` are called by the relay's thread; the renewals run
    on the keeper's thread, started by :meth:`start`. Without it (a relay driven pass by
    pass in tests) :meth:`renew` renews on the caller's thread.
    """

    def __init__(self, store: OutboxStore, lease_timeout: float, *, name: str) -> None:
        self.store = store
        self.lease_timeout = lease_timeout
        self.interval = lease_timeout / RENEWALS_PER_LEASE
        self.name = name
        #: Rows renewed since start, for the relay's statistics and the tests.
        self.renewed = 0
        self._held: dict[int, ClaimedEvent] = {}
        self._lock = threading.Lock()
        self._ticker = Ticker(name, self.interval, self._renew_logging_failures, store.alias)
        self._failing = False

    @property
    def held(self) -> int:
        """How many rows the keeper holds now."""
        return len(self._held)

    def hold(self, events: Iterable[ClaimedEvent], *, claimed_in: float = 0.0) -> None:
        """Keep renewing ``events`` until :meth:`let_go`. ``claimed_in`` is how long the
        claim took: its leases started running when it did, so a claim slower than a
        renewal interval has its rows renewed at once."""
        with self._lock:
            self._held.update((event.id, event) for event in events)
        if claimed_in >= self.interval:
            self._ticker.wake()

    def let_go(self, events: Iterable[ClaimedEvent]) -> None:
        """Stop renewing ``events`` (settled, handed back, or given up on)."""
        with self._lock:
            for event in events:
                self._held.pop(event.id, None)

    def renew(self) -> int:
        """Renew every held lease once; returns how many rows were still held."""
        with self._lock:
            events = list(self._held.values())
        if not events:
            return 0
        renewed = self.store.renew(events, self.lease_timeout)
        self.renewed += renewed
        return renewed

    # -- the thread --------------------------------------------------------------------
    def start(self) -> None:
        self._ticker.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stop renewing; rows still held keep the lease they have."""
        self._ticker.stop(timeout)

    def _renew_logging_failures(self) -> None:
        try:
            self.renew()
        except Error as exc:
            # The relay's own thread meets the same outage and reports it; one line here
            # per outage says the leases are at risk.
            if not self._failing:
                logger.warning("[%s] could not renew the leases of %d claimed event(s) (%s); "
                               "trying again in %.1fs", self.name, self.held, exc,
                               self.interval)
            self._failing = True
            connections[self.store.alias].close()
        else:
            self._failing = False
