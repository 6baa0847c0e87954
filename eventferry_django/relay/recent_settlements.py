"""What a relay settled in its last moments before a database outage, to settle again.

A relay commits its settlements without waiting for the disk where the vendor allows it
(PostgreSQL's ``synchronous_commit = off``): a crash then loses the last fraction of a
second of commits. A lost claim is harmless (nothing of its batch was written but its
journal row, which its settlement deletes), but a lost ack, retry, burial or hand-back
leaves a batch in the journal that nobody will settle: its rows would wait for a takeover
and cost an attempt, so a database crash could turn an event dead. So the relay keeps
its recent settlements and, after an outage, runs them again. Each changes a row only
once (see :mod:`~eventferry_django.store.settlement_sql`), so running one again changes
only what the crash undid.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from ..store.outbox import Settlement

#: Settlements younger than this are kept: a crash loses commits of well under a second
#: (three WAL writer rounds on PostgreSQL), and the relay may notice it a little later.
KEEP_SECONDS = 5.0
#: However old, the last few are kept too: a relay may notice a crash long after its last
#: settlement (a slow publisher).
KEEP_AT_LEAST = 4


class RecentSettlements:
    """Keeps the latest settlements; after :meth:`outage`, :attr:`to_repeat` holds them
    until :meth:`repeated` says they were run again."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._kept: deque[tuple[float, Settlement]] = deque()
        self.to_repeat: list[Settlement] = []

    def record(self, settlement: Settlement) -> None:
        now = self._clock()
        self._kept.append((now, settlement))
        while len(self._kept) > KEEP_AT_LEAST and now - self._kept[0][0] > KEEP_SECONDS:
            self._kept.popleft()

    def outage(self) -> None:
        """The database failed: what it may have lost is to be settled again."""
        self.to_repeat.extend(settlement for _, settlement in self._kept)
        self._kept.clear()

    def repeated(self) -> None:
        self.to_repeat.clear()
