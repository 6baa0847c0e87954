"""Relays with a share of the buckets give rows written without a bucket theirs
(:mod:`~eventferry_django.store.bucket_fill`: rows written by a writer that leaves
the bucket out, such as a development build before 0.1.0 during a rolling upgrade), so
that claims by bucket find them and no relay keeps aggregates that are not its own.

A relay fills on its membership's thread, after a look: as soon as it has a share (relays
started together fill before their first claim), then while rows without a bucket turn
up, at every look; once none do, at each check-in (only code of an earlier release writes
new ones), where finding none is one index seek. A relay alone claims every bucket and
fills nothing.
"""

from __future__ import annotations

import logging

from django.db import Error

from ..store.outbox import OutboxStore

logger = logging.getLogger(__name__)


class BucketFiller:
    def __init__(self, store: OutboxStore, relay_id: str) -> None:
        self.store = store
        self.relay_id = relay_id
        #: Whether the next look must fill: the relay just got a share, or the last fill
        #: found rows without a bucket.
        self._due = True
        self._failing = False

    def after_look(self, buckets: tuple[int, ...] | None, *, checked_in: bool) -> None:
        """Fill when one is due; ``buckets`` is the relay's share (None: it has none)."""
        if buckets is None:
            self._due = True
            return
        if not (self._due or checked_in):
            return
        try:
            self._due = self.store.fill_buckets() > 0
        except Error as exc:
            if not self._failing:
                logger.warning("[%s] could not give rows without a bucket theirs (%s); "
                               "they stay anyone's until it can (is the outbox "
                               "migrated?)", self.relay_id, exc)
            self._failing, self._due = True, False
            return
        self._failing = False
