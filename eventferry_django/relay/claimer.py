"""Everything a relay does to claim, in one place: what each claim asks for (the
:class:`~.planner.ClaimPlanner`), which buckets are the relay's own (its
:class:`~.membership.Membership`), and what follows each claim (its metric, the planner's
learning, the :class:`~eventferry_django.store.statistics.StatisticsKeeper`). Every claim
goes through :meth:`Claimer.claim`, on its own or in the transaction that settles a
batch."""

from __future__ import annotations

import time
from collections.abc import Sequence

from .. import metrics
from ..store.claim import ClaimRequest
from ..store.outbox import ClaimedEvent, Failure, OutboxStore
from ..store.statistics import StatisticsKeeper
from .membership import Membership
from .planner import ClaimPlanner
from .reporting import RelayStats


class Claimer:
    """Claims for one relay; ``stats`` says how many rows it has settled so far (for
    ``--max-events``)."""

    def __init__(self, store: OutboxStore, planner: ClaimPlanner,
                 membership: Membership | None, stats: RelayStats) -> None:
        self.store = store
        self.planner = planner
        self.membership = membership
        self.stats = stats
        #: Refreshes the planner's statistics when a claim shows them stale (after a
        #: database restart they can stay those of an empty queue while a backlog waits).
        self.statistics = StatisticsKeeper(store)
        #: Whether the claim made with the last settlement found nothing: the next claim
        #: made on its own, right after, would find nothing either, so the relay goes to
        #: its idle sleep instead of asking again at once.
        self._found_nothing = False

    def request(self, in_flight: int = 0) -> ClaimRequest | None:
        """What the next claim asks for; None when ``--max-events`` leaves nothing."""
        buckets = self.membership.buckets if self.membership is not None else None
        return self.planner.next_claim(claimed=self.stats.claimed, in_flight=in_flight,
                                       buckets=buckets)

    def claim(self, delivered: Sequence[ClaimedEvent] = (), failures: Sequence[Failure] = (),
              *, in_flight: int = 0, claim: bool = True
              ) -> tuple[int, list[ClaimedEvent], float]:
        """Settle ``delivered`` and ``failures`` and, with ``claim``, claim the next rows
        (leaving out ``in_flight`` rows from ``--max-events``): one transaction where the
        vendor allows. Returns how many settled rows were still ours, what was claimed
        and how long it took."""
        settling = bool(delivered or failures)
        request = self.request(in_flight) if claim else None
        started = time.perf_counter()
        if settling:
            settled, events = self.store.settle(delivered, failures, claim=request)
        elif request is None or self._found_nothing:
            self._found_nothing = False
            return 0, [], 0.0
        else:
            settled, events = 0, self.store.take(request)
        seconds = time.perf_counter() - started
        if request is not None:
            self._found(request, events, seconds, alone=not settling)
        return settled, events, seconds

    def _found(self, request: ClaimRequest, events: list[ClaimedEvent], seconds: float, *,
               alone: bool) -> None:
        if alone:
            metrics.observe_claim(seconds)
        self.planner.found(request, len(events))
        self._found_nothing = not events and not alone
        self.statistics.maybe_refresh(len(events), seconds)
