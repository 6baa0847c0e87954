"""Relays share the work: each wants the buckets of its share.

Every outbox row carries its aggregate's bucket, one of 256. The live relays of an outbox
share the buckets out, and each relay's :class:`~.bucket_holder.BucketHolder` takes the
leases of its share's buckets; a relay claims only from buckets it holds, so its claims
cost what its share holds, not what the whole backlog does. A relay alone wants every
bucket.

**Who is live.** Each relay checks in with the relay registry, stamped by
the database's clock, every :data:`MAX_CHECK_IN_INTERVAL` seconds or more often, and
looks at it (a read) every :data:`LOOK_INTERVAL` seconds; a relay seen within half a
``CLAIM_TIMEOUT`` counts as live. A relay that stops cleanly leaves the registry at once;
one that dies is dropped after half a ``CLAIM_TIMEOUT``, while its rows' leases still
run, so its buckets have moved by the time its leases expire.

**Who owns what.** Every relay computes the same assignment from the live instance names
alone (:func:`assign`): each bucket goes to the relay that ranks it highest by a hash of
(bucket, instance), unless that relay already holds its even share (256 / N, the
remainder going one each to the first relays by name), in which case to the next. So the
shares differ by one bucket at most, and a relay that joins or leaves moves little more
than the buckets it must: about 1/N of them (the rest keep their owner).

**Wanted is not held.** The share says which buckets a relay wants; the bucket leases
say which it holds. While two relays' views differ for a moment both may want a bucket,
and only one holds it: the other takes it once it is released (its batches in flight
settled) or its lease runs out.

**Starting together.** A relay that starts checks in, then looks again for
:data:`JOIN_GRACE` before its first claim: relays started together begin with the same
view, instead of the first one claiming every aggregate until it sees the others (a
relay settles a batch and claims the next in one transaction, so it keeps what it holds).

**Rows without a bucket** (written by a writer that leaves it out, such as a development
build before 0.1.0) wait until a relay with a share gives them theirs, after its looks
(:mod:`.bucket_filler`); a relay holding every bucket claims them as they are.

**Rolling upgrades.** A relay of this release checks in under a name that starts with
:data:`~eventferry_django.store.registry.BUCKET_RELAY`. A relay of an earlier release
checks in under another name: one of 0.1.0 claims nothing since migration 0003 (its
claims fail on ``CK_<outbox>_claimed_needs_0_2``), so no bucket may be left to it; while
one is live, this release's relays want every bucket.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from functools import lru_cache

from django.db import Error, connections

from ..contract import BUCKETS
from ..store.registry import BUCKET_RELAY, RelayRegistry, new_instance
from .bucket_filler import BucketFiller
from .ticker import Ticker

logger = logging.getLogger(__name__)

#: The longest wait between check-ins (writes that keep the relay live).
MAX_CHECK_IN_INTERVAL = 2.0
#: How often a relay looks at who is live (a read): how soon it sees one join or leave.
LOOK_INTERVAL = 0.2
#: How long a starting relay looks at the registry before its first claim.
JOIN_GRACE = 0.5
#: Check-ins within which a relay must be seen to count as live, per ``CLAIM_TIMEOUT``.
LIVE_SHARE_OF_LEASE = 0.5


def _rank(bucket: int, instance: str) -> bytes:
    return hashlib.blake2b(f"{bucket}/{instance}".encode(), digest_size=8).digest()


@lru_cache(maxsize=8)
def assign(instances: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """Each live instance's buckets (see the module's docstring); ``instances`` in the
    registry's order."""
    ordered = sorted(instances)
    even, remainder = divmod(BUCKETS, len(ordered))
    room = {name: even + (1 if n < remainder else 0) for n, name in enumerate(ordered)}
    owned: dict[str, list[int]] = {name: [] for name in ordered}
    for bucket in range(BUCKETS):
        for name in sorted(ordered, key=lambda name: _rank(bucket, name), reverse=True):
            if len(owned[name]) < room[name]:
                owned[name].append(bucket)
                break
    return {name: tuple(buckets) for name, buckets in owned.items()}


def buckets_of(live: Sequence[str], instance: str) -> tuple[int, ...] | None:
    """``instance``'s buckets among the ``live`` instances; None (every bucket) when it is
    alone, not among them (its check-ins are failing: it claims as one relay would,
    which stays correct) or beside a relay of an earlier release."""
    if (len(live) < 2 or instance not in live
            or any(not name.startswith(BUCKET_RELAY) for name in live)):
        return None
    return assign(tuple(live))[instance]


class Membership:
    """This relay's row in the registry and its current :attr:`buckets`, refreshed by
    each look: the first in :meth:`start`, the rest on a thread of its own."""

    def __init__(self, registry: RelayRegistry, relay_id: str, claim_timeout: float, *,
                 instance: str | None = None, filler: BucketFiller | None = None,
                 on_share: Callable[[tuple[int, ...] | None], object] | None = None
                 ) -> None:
        self.registry = registry
        #: Gives rows written without a bucket theirs, after each look.
        self.filler = filler
        #: Hears this relay's share after each look (the relay's bucket holder).
        self.on_share = on_share
        self.relay_id = relay_id
        self.instance = instance or new_instance()
        self.live_for = claim_timeout * LIVE_SHARE_OF_LEASE
        self.check_in_interval = min(MAX_CHECK_IN_INTERVAL, self.live_for / 3)
        #: The live relays at the last look (1 until one succeeds).
        self.relays = 1
        #: This relay's buckets; None: every bucket (alone, or claiming as if alone).
        self.buckets: tuple[int, ...] | None = None
        self._checked_in_at = 0.0
        self._failing = False
        self._legacy = False
        self._ticker = Ticker(f"eventferry-members-{relay_id}",
                              min(LOOK_INTERVAL, self.check_in_interval), self.look,
                              registry.alias)

    def look(self) -> None:
        """Learn who is live and this relay's buckets, checking in when one is due. A
        failure (the database away, or the outbox not migrated) is logged once and
        leaves the relay claiming every bucket: correct, only not shared."""
        checking_in = time.monotonic() - self._checked_in_at >= self.check_in_interval
        try:
            if checking_in:
                live = self.registry.check_in(self.instance, self.relay_id, self.live_for)
                self._checked_in_at = time.monotonic()
            else:
                live = self.registry.live(self.live_for)
        except Error as exc:
            if not self._failing:
                logger.warning("[%s] could not check in with the relay registry (%s); "
                               "claiming every bucket until it answers", self.relay_id, exc)
            self._failing = True
            self.relays, self.buckets = 1, None
            if self.on_share is not None:
                self.on_share(None)
            connections[self.registry.alias].close()
            return
        legacy = any(not name.startswith(BUCKET_RELAY) for name in live)
        if legacy and not self._legacy:
            logger.warning("[%s] a relay of an earlier release is running: it cannot claim "
                           "since migration 0003, so this relay wants every bucket until it "
                           "stops (docs/upgrading.md)", self.relay_id)
        if self._failing or len(live) != self.relays:
            logger.info("[%s] %d relay(s) share the work", self.relay_id, len(live))
        self._failing, self._legacy = False, legacy
        self.relays, self.buckets = len(live), buckets_of(live, self.instance)
        if self.on_share is not None:
            self.on_share(self.buckets)
        if self.filler is not None:
            self.filler.after_look(self.buckets, checked_in=checking_in)

    def start(self, sleep: Callable[[float], object] = time.sleep) -> None:
        """Check in, look again for :data:`JOIN_GRACE`, then keep looking on a thread."""
        self.look()
        looks = round(JOIN_GRACE / LOOK_INTERVAL)
        for _ in range(looks):
            sleep(JOIN_GRACE / looks)
            self.look()
        self._ticker.start()

    def stop(self) -> None:
        """Stop looking and leave the registry, so the others take this relay's buckets
        at their next look."""
        self._ticker.stop()
        try:
            self.registry.leave(self.instance)
        except Error as exc:
            logger.info("[%s] could not leave the relay registry (%s); the others drop "
                        "this relay after %.0fs", self.relay_id, exc, self.live_for)
