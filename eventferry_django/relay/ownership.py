"""Which buckets a relay works on: those its share names (:mod:`.membership`), held by
lease (:mod:`.bucket_holder`). One object for the relay's loop to start, ask and stop, so
the loop reads as claim, send, settle.

A relay that shares wants the buckets its share names; one that does not (SQLite, whose
single writer never let relays share; a relay that drains and exits) wants every bucket
and waits as a standby while another relay holds them.
"""

from __future__ import annotations

import logging

from django.db import Error

from ..store.bucket_leases import BucketLeases
from ..store.claim import ALL_BUCKETS
from ..store.outbox import OutboxStore
from ..store.registry import RelayRegistry
from .bucket_filler import BucketFiller
from .bucket_holder import BucketHolder
from .config import RelayConfig
from .membership import Membership

logger = logging.getLogger(__name__)


class BucketOwnership:
    """The relay's :attr:`holder` of bucket leases and, where it shares, its
    :attr:`membership` in the relay registry, which tells the holder what to want."""

    def __init__(self, store: OutboxStore, config: RelayConfig, *, shares: bool) -> None:
        self.claim_timeout = config.claim_timeout
        self.holder = BucketHolder(BucketLeases(store.alias), store.journal, store.instance,
                                   config.claim_timeout)
        self.membership = Membership(
            RelayRegistry(store.alias), config.relay_id, config.claim_timeout,
            instance=store.instance, filler=BucketFiller(store, config.relay_id),
            on_share=self._share) if shares else None
        self._held = False

    def start(self) -> None:
        """Look for the share, then keep the leases on the holder's thread. Each run
        takes its buckets anew: the last one let them go on its way out."""
        self.holder.want(ALL_BUCKETS)
        self._held = False
        if self.membership is not None:
            self.membership.start()
        self.holder.start()

    def hold(self) -> None:
        """Take the buckets before the first claim, on the caller's thread (a relay that
        drains and exits would otherwise find nothing held and stop); the holder's own
        thread renews them from then on."""
        if not self._held:
            self.holder.tick()
            self._held = True

    def lapsed(self) -> None:
        """The leases may have run out: take buckets anew before the next claim."""
        self._held = False

    def stop(self, *, release: bool) -> None:
        """Stop renewing and, with ``release`` (nothing is in flight), let every bucket
        go, so another relay takes them at once instead of when their leases run out;
        then leave the registry."""
        self.holder.stop()
        if release:
            try:
                self.holder.release_all()
            except Error as exc:
                logger.info("could not release the bucket leases (%s); they run out in %gs",
                            exc, self.claim_timeout)
        if self.membership is not None:
            self.membership.stop()

    def _share(self, buckets: tuple[int, ...] | None) -> None:
        """The membership's view of this relay's share (None: every bucket)."""
        self.holder.want(ALL_BUCKETS if buckets is None else buckets)
