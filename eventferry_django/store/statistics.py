"""Planner statistics that no longer describe the outbox, refreshed by the relay.

The claim's plan depends on what the planner believes about the open rows. PostgreSQL
analyses a table after a number of changes counted in the statistics collector; crash
recovery resets those counters, and claims that turn slow change few rows, so after a
restart the statistics can stay those of a drained queue while a backlog waits (issue
22: 6-13 s a claim). With statistics taken when no row was open, the planner believes
the open-rows indexes empty and probes each candidate's aggregate through the claim
index, reading every open row per candidate: draining 20,000 events behind 20,000 done
rows read 5.6 million index entries in 7.3 s, against 0.6 s after an ANALYZE (numbers and
commands: docs/design/claim-plans.md). An ANALYZE of a 1,000,000-row outbox takes about 0.2 s.

:class:`StatisticsKeeper` is the policy the relay asks after each claim. It looks (one
catalog read) only after a claim that handed out many rows or took long, and at most
every ``check_every`` seconds; it refreshes when the planner believes fewer open rows
than that one claim handed out, at most every ``min_interval`` seconds. Elsewhere than
PostgreSQL it does nothing (see ``dialect.statistics``, :mod:`.statistics_sql`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import cached_property
from typing import Any, Protocol

from django.db import DatabaseError

from .base import Dialect

logger = logging.getLogger(__name__)


class _Store(Protocol):
    dialect: Dialect

    @property
    def connection(self) -> Any: ...


class StatisticsKeeper:
    """Refreshes the outbox's planner statistics when a claim shows them stale.

    Call :meth:`maybe_refresh` after each claim, outside its transaction, with how many
    rows it handed out and how long it took. ``min_rows``: a claim of fewer rows (and
    faster than ``slow_claim`` seconds) is no evidence either way and costs nothing.
    """

    def __init__(
        self,
        store: _Store,
        *,
        min_rows: int = 100,
        slow_claim: float = 1.0,
        check_every: float = 10.0,
        min_interval: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.min_rows = min_rows
        self.slow_claim = slow_claim
        self.check_every = check_every
        self.min_interval = min_interval
        self.clock = clock
        self._checked_at: float | None = None
        self._refreshed_at: float | None = None
        #: How many times this keeper ran the refresh (for logs and tests).
        self.refreshes = 0

    @cached_property
    def enabled(self) -> bool:
        """Whether the vendor has statistics to refresh; asked after every claim, so
        answered once."""
        dialect = self.store.dialect
        return (dialect.statistics.refresh_statistics_sql() is not None
                and dialect.statistics.believed_open_rows_sql() is not None)

    def maybe_refresh(self, claimed: int, claim_seconds: float) -> bool:
        """Refresh the statistics if this claim shows them stale; True when it did. After
        a claim that found nothing, drop the cached plans instead (:meth:`forget_plans`)."""
        if not self.enabled:
            return False
        if claimed == 0:
            self.forget_plans()
            return False
        if claimed < self.min_rows and claim_seconds < self.slow_claim:
            return False
        now = self.clock()
        if self._checked_at is not None and now - self._checked_at < self.check_every:
            return False
        if self._refreshed_at is not None and now - self._refreshed_at < self.min_interval:
            return False
        self._checked_at = now
        try:
            believed = self.believed_open_rows()
            if believed is not None and believed >= max(claimed, 1):
                return False
            self._refreshed_at = now
            self.refresh()
        except DatabaseError as exc:
            if self._connection_lost():
                raise
            logger.warning("could not refresh the outbox's statistics: %s", exc)
            return False
        self.refreshes += 1
        logger.info("outbox statistics refreshed: the planner believed %s open rows, a "
                    "claim handed out %d in %.3f s", "unknown" if believed is None
                    else f"{believed:,.0f}", claimed, claim_seconds)
        return True

    def forget_plans(self) -> None:
        """Drop the connection's cached plans, so that the next claim is planned afresh.

        The relay keeps one generic plan of its claim per connection, made with the
        table's size at that moment, and inserting rows does not invalidate it (only an
        ANALYZE or VACUUM does). Made on a physically empty outbox (purged, and truncated
        by VACUUM), that plan reads the table sequentially with a sequential scan inside
        for each row: the first claim after a burst of 100,000 events ran for more than
        12 minutes, and an ANALYZE meanwhile does not stop a claim already running. A
        claim that found nothing is when the outbox may be empty; planning the next
        one afresh costs about a millisecond.
        """
        sql = self.store.dialect.statistics.forget_plans_sql()
        if sql is None:
            return
        try:
            with self.store.connection.cursor() as cursor:
                cursor.execute(sql)
        except DatabaseError as exc:
            if self._connection_lost():
                raise
            logger.warning("could not drop the relay's cached plans: %s", exc)

    def _connection_lost(self) -> bool:
        """Whether the error left the connection unusable: then it goes up, as from any
        other statement, the relay's outage to report and recover from. Swallowed here,
        the relay reconnected silently at its next pass, and a connection killed while it
        was idle went unreported whenever this statement was the first to meet it."""
        return not self.store.connection.is_usable()

    def believed_open_rows(self) -> float | None:
        """The planner's belief (None: it has none, the table was never analysed)."""
        query = self.store.dialect.statistics.believed_open_rows_sql()
        assert query is not None
        sql, params = query
        with self.store.connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is None or row[0] is None or float(row[0]) < 0:
            return None
        return float(row[0])

    def refresh(self) -> None:
        sql = self.store.dialect.statistics.refresh_statistics_sql()
        assert sql is not None
        with self.store.connection.cursor() as cursor:
            cursor.execute(sql)
