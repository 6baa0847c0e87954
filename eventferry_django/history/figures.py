"""What ``outbox_report`` computes (:mod:`.report`) and writes out
(:mod:`.report_files`): the figures of each topic, per hour and over the whole window."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

#: The latency percentiles reported, as fractions.
PERCENTILES = (0.5, 0.95, 0.99)
#: The ``dead_by_error`` key of dead rows without a last error.
NO_ERROR = "(no error recorded)"


@dataclass(frozen=True)
class Delivery:
    """Counts and latency of one topic in one hour (``hour`` None: the whole window)."""

    topic: str
    hour: dt.datetime | None
    events: int
    done: int
    dead: int
    latency_ms: tuple[float | None, float | None, float | None]


@dataclass(frozen=True)
class Count:
    """Rows of one topic in one hour (None: the whole window) with one ``key``: an
    attempts count or an error text."""

    topic: str
    hour: dt.datetime | None
    key: str
    events: int


@dataclass
class Figures:
    source: str
    since: dt.datetime | None
    until: dt.datetime | None
    hours: list[Delivery] = field(default_factory=list)
    topics: list[Delivery] = field(default_factory=list)
    attempts: list[Count] = field(default_factory=list)
    dead_errors: list[Count] = field(default_factory=list)
    #: Erasures the archive's log records (None: the report read the outbox table).
    erasures: int | None = None

    @property
    def events(self) -> int:
        return sum(t.events for t in self.topics)
