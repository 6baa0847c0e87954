"""A relay's bucket leases (the one-write design, docs/design/one-write.md): the buckets
its share names, taken, renewed and released on a thread and a connection of their own.

Each tick renews what the relay holds before it takes anything new, so a relay that
falls behind keeps what it has rather than reaching for more (namastack-outbox #395: a
renewal queued behind other work lost its leases). A bucket the share no longer names is
released only once none of its batches is in flight, so whoever takes it next starts
where this relay's settlements ended and nothing is delivered twice in a clean handover.
A bucket taken from a relay whose lease ran out is swept out of that relay's batches in
flight in the take's transaction (:meth:`.InFlightJournal.sweep`).

**Until when.** The relay must not hand a batch to the broker once its leases may have
run out: by then another relay may hold its buckets. Every lease the database renews or
grants in a tick expires no sooner than the tick's start plus the lease, by the
database's clock, since the statements run after the tick starts. So
:meth:`BucketHolder.valid` counts from the tick's start on the relay's own monotonic
clock, less a margin for the two clocks' rates, and only a tick that succeeds moves it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager

from django.db import Error, connections

from ..contract import BUCKETS
from ..store.bucket_leases import BucketLeases
from ..store.in_flight_journal import InFlightJournal
from .ticker import Ticker

logger = logging.getLogger(__name__)

#: Ticks per lease: a lease is renewed with two thirds of it still to run, so one tick
#: can fail (a database hiccup) and the next still comes in time.
TICKS_PER_LEASE = 3
#: The share of a lease the relay does not count on, for the clocks' rates and the time a
#: publish call takes once started.
LEASE_MARGIN = 0.1
#: How soon a tick that left wanted buckets untaken (another relay still holds them, and
#: releases them once its batches from them are settled) is followed by the next.
TAKE_AGAIN_AFTER = 0.25


class LeasesLapsed(Exception):
    """The relay's bucket leases may have run out (it was paused, or cut off from the
    database): another relay may hold its buckets now, so it must not publish."""


class BucketHolder:
    """The bucket leases of one relay instance. :meth:`want` and the in-flight
    accounting are called from the relay's thread; :meth:`tick` from the holder's own
    (:meth:`start`) or, in tests, from the caller's."""

    def __init__(self, leases: BucketLeases, journal: InFlightJournal, instance: str,
                 lease: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.leases = leases
        self.journal = journal
        self.instance = instance
        self.lease = lease
        self._clock = clock
        self._lock = threading.Lock()
        self._wanted: frozenset[int] = frozenset()
        self._held: dict[int, int] = {}
        self._in_flight: Counter[int] = Counter()
        self._valid_until = float("-inf")
        self._failing = False
        self._renew_every = lease / TICKS_PER_LEASE
        self._ticker = Ticker(f"eventferry-buckets-{instance}", self._renew_every,
                              self._tick_logging_failures, leases.alias)

    # -- what the relay asks -------------------------------------------------------------
    def want(self, buckets: Iterable[int]) -> None:
        """The buckets the relay's share names now; the next tick takes and releases."""
        wanted = frozenset(buckets)
        with self._lock:
            changed, self._wanted = wanted != self._wanted, wanted
        if changed:
            self._ticker.wake()

    def held(self) -> dict[int, int]:
        """The buckets held at the last tick, with the epochs they are held under."""
        with self._lock:
            return dict(self._held)

    def claims_from(self, buckets: Collection[int]) -> bool:
        """Whether the relay's next claim would take rows of any of ``buckets``: it
        holds one that its share names (see :meth:`claiming`)."""
        with self._lock:
            return any(b in self._held and b in self._wanted for b in buckets)

    def valid(self) -> bool:
        """Whether every lease held surely still runs (see the module's docstring)."""
        with self._lock:
            return self._clock() < self._valid_until

    def check(self) -> None:
        """Raise :class:`LeasesLapsed` unless :meth:`valid`."""
        if not self.valid():
            raise LeasesLapsed(f"the bucket leases of {self.instance} may have run out (the "
                               "relay was paused or cut off from the database for longer "
                               "than CLAIM_TIMEOUT allows)")

    @contextmanager
    def claiming(self) -> Iterator[tuple[int, ...] | None]:
        """The buckets to claim from (None: every bucket, held all): those held that the
        share still names. One being let go of gets no new batches, so its batches in
        flight end and it can go. They are kept from being released while the claim
        runs; its batch's buckets are :meth:`sent` before it ends. Empty when nothing
        is held."""
        with self._lock:
            buckets = tuple(sorted(b for b in self._held if b in self._wanted))
            self._in_flight.update(buckets)
        try:
            yield None if len(buckets) == BUCKETS else buckets
        finally:
            self.settled(buckets)

    def sent(self, buckets: Iterable[int]) -> None:
        """A batch with rows of ``buckets`` is in flight: keep them until :meth:`settled`."""
        with self._lock:
            self._in_flight.update(set(buckets))

    def settled(self, buckets: Iterable[int]) -> None:
        """A batch :meth:`sent` with rows of ``buckets`` is settled or handed back."""
        with self._lock:
            self._in_flight.subtract(set(buckets))
            self._in_flight = +self._in_flight

    # -- the leases ----------------------------------------------------------------------
    def tick(self) -> Mapping[int, int]:
        """Renew, release what the share no longer names and nothing of which is in
        flight, take what it names and is free; returns what is held then."""
        started = self._clock()
        held = self.leases.renew(self.instance, self.lease)
        with self._lock:
            wanted, in_flight = self._wanted, set(self._in_flight)
        idle = [b for b in held if b not in wanted and b not in in_flight]
        if idle:
            self.leases.release(self.instance, idle)
            held = {b: e for b, e in held.items() if b not in idle}
        missing = wanted - held.keys()
        if missing:
            held = self.leases.take(
                self.instance, missing, self.lease,
                then=lambda cursor, taken: self.journal.sweep(cursor, self.instance, taken))
        with self._lock:
            self._held = held
            self._valid_until = max(self._valid_until,
                                    started + self.lease * (1 - LEASE_MARGIN))
            untaken = self._wanted - held.keys()
        self._ticker.interval = TAKE_AGAIN_AFTER if untaken else self._renew_every
        return held

    def release_all(self) -> None:
        """Let every bucket go (the relay is stopping, its batches settled)."""
        with self._lock:
            self._wanted, self._held = frozenset(), {}
            self._valid_until = float("-inf")
        self.leases.release(self.instance)

    # -- the thread ----------------------------------------------------------------------
    def start(self) -> None:
        self._ticker.start()

    def stop(self, timeout: float | None = None) -> None:
        self._ticker.stop(timeout)

    def _tick_logging_failures(self) -> None:
        try:
            self.tick()
        except Error as exc:
            if not self._failing:
                logger.warning("[%s] could not renew or take bucket leases (%s); trying "
                               "again in %.1fs", self.instance, exc, self._ticker.interval)
            self._failing = True
            connections[self.leases.alias].close()
        else:
            self._failing = False
