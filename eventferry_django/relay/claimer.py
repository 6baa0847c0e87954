"""Everything a relay does to claim, in one place: what each claim asks for (the
:class:`~.planner.ClaimPlanner`), which buckets it may read (its
:class:`~.bucket_holder.BucketHolder`'s leases), which aggregates it passes over (those of
its batches in flight), and what follows each claim (its metric, the
:class:`~eventferry_django.store.statistics.StatisticsKeeper`). Every claim goes through
:meth:`Claimer.claim`, on its own or in the transaction that settles a batch."""

from __future__ import annotations

import time
from collections.abc import Sequence

from .. import metrics
from ..store.outbox import ClaimedEvent, OutboxStore, Settlement
from ..store.statistics import StatisticsKeeper
from .bucket_holder import BucketHolder
from .flight import buckets_of
from .planner import ClaimPlanner
from .reporting import RelayStats


class Claimer:
    """Claims for one relay; ``stats`` says how many rows it has claimed so far (for
    ``--max-events``)."""

    def __init__(self, store: OutboxStore, planner: ClaimPlanner, holder: BucketHolder,
                 stats: RelayStats) -> None:
        self.store = store
        self.planner = planner
        self.holder = holder
        self.stats = stats
        #: Refreshes the planner's statistics when a claim shows them stale (after a
        #: database restart they can stay those of an empty queue while a backlog waits).
        self.statistics = StatisticsKeeper(store)
        #: Whether the claim made with the last settlement found nothing: the next claim
        #: made on its own, right after, would find nothing either, so the relay goes to
        #: its idle sleep instead of asking again at once.
        self._found_nothing = False

    def claim(self, settlement: Settlement | None = None, *, in_flight: Sequence[str] = (),
              rows_in_flight: int = 0, settling: int = 0, claim: bool = True
              ) -> tuple[int, list[ClaimedEvent], float]:
        """Settle ``settlement`` (a batch of ``settling`` rows) and, with ``claim``, claim
        the next batch, passing over the aggregates ``in_flight`` and their
        ``rows_in_flight`` rows (which with the settled rows are left out of
        ``--max-events``): one transaction. Returns how many settled rows were still
        ours, what was claimed and how long it took."""
        with self.holder.claiming() as buckets:
            request = (self.planner.next_claim(
                buckets, claimed=self.stats.claimed, in_flight=settling + rows_in_flight,
                passing=rows_in_flight) if claim else None)
            started = time.perf_counter()
            if settlement is not None:
                settled, events = self.store.settle(settlement, claim=request,
                                                    in_flight=in_flight)
            elif request is None or self._found_nothing:
                self._found_nothing = False
                return 0, [], 0.0
            else:
                settled, events = 0, self.store.take(request, in_flight)
            seconds = time.perf_counter() - started
            if events:
                # While the claim still keeps its buckets: from now on the batch keeps
                # its own, until it is settled (InFlight.left).
                self.holder.sent(buckets_of(events))
        if request is not None:
            alone = settlement is None
            if alone:
                metrics.observe_claim(seconds)
            self._found_nothing = not events and not alone
            self.statistics.maybe_refresh(len(events), seconds)
        return settled, events, seconds
