"""How the outbox is doing: backlog by status (and by topic), dead rows, the age of the
oldest pending event, the age of the oldest event a relay could claim now and when the
last one was published.

One code path for every face: ``manage.py outbox_status`` prints it, and the Prometheus
backlog collector (:func:`eventferry_django.metrics.register_backlog_collector`) exports
it as gauges on every scrape.

The queries are built to stay cheap on a table holding millions of done rows; none of
them counts or sorts done rows:

- counts of open rows (pending, failed) read the open statuses' range of an index led
  by ``status``: the claim index (partial, open rows only, where the vendor has partial
  indexes) or the retention index ``(status, processed_at)``, whichever the planner
  prefers; done rows lie outside that range either way;
- the claimed rows are those of the relays' batches in flight: a claim writes nothing to
  its rows (they stay pending, or failed for a retry), so the journal of batches in
  flight (a few rows per relay) names them, and they are counted by primary key and
  moved out of the status they hold;
- the dead count is a range of the retention index ``(status, processed_at)``;
- the oldest pending event is the pending row with the smallest id, read as the first
  entry of the claim index in its own order (``status, next_retry_at, id``) with
  ``LIMIT 1``. ``created_at`` has no index, so ``MIN(created_at)`` would read every
  pending row; ``MIN(id)`` or ``ORDER BY id`` get planned as a walk of the primary key
  from its start, through every done row, on PostgreSQL and MariaDB respectively. Ids
  grow with insertion, so this is the earliest enqueued pending row;
- scheduled rows (pending, with a delivery time still ahead by the database's clock)
  are counted apart from the pending ones, in the pending status's range of the claim
  index, past its due rows;
- the oldest claimable row is found by the claim's own probes, each stopping at its
  first row (see :mod:`eventferry_django.store.claimable`);
- the last publication is ``MAX(processed_at)`` of done rows, read as the first entry of
  a backward scan of the retention index.

The per-topic breakdown (``by_topic=True``, used by the command, not by the collector)
has to read the rows themselves, since ``topic`` is in no index: its cost grows with the
backlog and the dead rows, never with the done rows.

Ages are measured with the application's clock against timestamps written by the
database's clock (UTC): a clock skew shows up in them, clamped at zero.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import connections
from django.db.models import Count

from .conf import get_settings
from .contract import OPEN, STATUS_NAMES
from .models import OPEN_STATUSES, OutboxEvent, OutboxEventQuerySet, Status
from .store.bound import BoundStore
from .store.claimable import PROBE_COLUMNS
from .store.in_flight_journal import InFlightJournal

#: Ids bound in one query counting the rows in flight: under SQL Server's 2,100 bound
#: parameters.
IDS_PER_QUERY = 1000
#: The statuses counted as backlog, by the names used in output and metric labels.
BACKLOG_STATUSES: dict[str, Status] = {STATUS_NAMES[code]: Status(code) for code in OPEN}
#: The backlog's names in output order: ``scheduled`` is the part of the pending rows
#: whose delivery time is still ahead (``publish_event(..., deliver_at=...)``).
BACKLOG_NAMES: tuple[str, ...] = ("pending", "scheduled", "claimed", "failed")
#: Column names of the per-topic breakdown, in output order.
TOPIC_COLUMNS: tuple[str, ...] = (*BACKLOG_NAMES, "dead")


@dataclass(frozen=True)
class OutboxStatus:
    """A snapshot of the outbox on one database alias."""

    database: str
    checked_at: dt.datetime
    #: Open rows by :data:`BACKLOG_NAMES` (always all four); ``pending`` excludes the
    #: ``scheduled`` rows.
    backlog: Mapping[str, int]
    dead: int
    #: ``created_at`` of the pending row with the smallest id, or None without one.
    oldest_pending_created_at: dt.datetime | None
    #: ``processed_at`` of the most recently published (done) row; None when there is none
    #: (nothing published yet, or every done row was purged).
    last_published_at: dt.datetime | None
    #: ``{topic: {"pending": n, "scheduled": n, "claimed": n, "failed": n, "dead": n}}``
    #: for topics with open or dead rows; None unless asked for.
    by_topic: Mapping[str, Mapping[str, int]] | None = None
    #: Since when the oldest row a relay could claim now has been claimable (written, or
    #: come due); None when no row can be claimed.
    oldest_claimable_since: dt.datetime | None = None

    @property
    def oldest_claimable_age_seconds(self) -> float:
        """How long the oldest claimable row has waited; 0 when there is none."""
        if self.oldest_claimable_since is None:
            return 0.0
        return _age(self.checked_at, self.oldest_claimable_since)

    @property
    def oldest_pending_age_seconds(self) -> float | None:
        if self.oldest_pending_created_at is None:
            return None
        return _age(self.checked_at, self.oldest_pending_created_at)

    @property
    def last_published_age_seconds(self) -> float | None:
        if self.last_published_at is None:
            return None
        return _age(self.checked_at, self.last_published_at)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with stable keys: ``outbox_status --json`` prints exactly this."""
        return {
            "database": self.database,
            "checked_at": _iso(self.checked_at),
            "backlog": dict(self.backlog),
            "dead": self.dead,
            "oldest_pending_created_at": _iso(self.oldest_pending_created_at),
            "oldest_pending_age_seconds": _rounded(self.oldest_pending_age_seconds),
            "oldest_claimable_since": _iso(self.oldest_claimable_since),
            "oldest_claimable_age_seconds": _rounded(self.oldest_claimable_age_seconds),
            "last_published_at": _iso(self.last_published_at),
            "last_published_age_seconds": _rounded(self.last_published_age_seconds),
            "topics": None if self.by_topic is None else {
                topic: dict(counts) for topic, counts in self.by_topic.items()
            },
        }


def outbox_status(using: str | None = None, *, by_topic: bool = False) -> OutboxStatus:
    """Read the status of the outbox on ``using`` (default ``EVENTFERRY["DATABASE"]``).

    A handful of short autocommit reads, each served by an index (see the module
    docstring); ``by_topic`` adds two that read the open and dead rows themselves.
    """
    alias = using or get_settings().database
    events = OutboxEvent.objects.using(alias)
    store = BoundStore(alias)
    checked_at = dt.datetime.now(dt.UTC)
    return OutboxStatus(
        database=alias,
        checked_at=checked_at,
        backlog=backlog_counts(events),
        dead=events.dead().count(),
        oldest_pending_created_at=oldest_pending_created_at(events),
        last_published_at=last_published_at(events),
        by_topic=topic_counts(events) if by_topic else None,
        oldest_claimable_since=oldest_claimable_since(events, store),
    )


def _open(events: OutboxEventQuerySet) -> OutboxEventQuerySet:
    # ``status IN (0, 1, 3)``: the claim index's own predicate, which SQLite needs to
    # see spelled out before it uses that partial index.
    return events.open().order_by()


def backlog_counts(events: OutboxEventQuerySet) -> dict[str, int]:
    """Open rows by :data:`BACKLOG_NAMES`: one ``GROUP BY status`` over an index led by
    status, and the scheduled rows counted apart."""
    counts = dict.fromkeys(BACKLOG_NAMES, 0)
    rows: Iterable[tuple[int, int]] = (
        _open(events).values_list("status").annotate(n=Count("*")).values_list("status", "n")
    )
    for status, n in rows:
        counts[STATUS_NAMES[status]] = n
    for (status,), n in _in_flight(events).items():
        counts[STATUS_NAMES[status]] -= n
        counts["claimed"] += n
    if counts["pending"]:
        counts["scheduled"] = events.scheduled().count()
        counts["pending"] -= counts["scheduled"]
    return counts


def _in_flight(events: OutboxEventQuerySet, *by: str) -> Counter[tuple[Any, ...]]:
    """The open rows of the relays' batches in flight, counted by ``by`` and status."""
    ids = [i for entry in InFlightJournal(events.db).entries() for i in entry.ids]
    counts: Counter[tuple[Any, ...]] = Counter()
    for start in range(0, len(ids), IDS_PER_QUERY):
        rows = (_open(events).filter(id__in=ids[start:start + IDS_PER_QUERY])
                .values_list(*by, "status").annotate(n=Count("*"))
                .values_list(*by, "status", "n"))
        for *key, n in rows:
            counts[tuple(key)] += n
    return counts


def oldest_claimable_since(events: OutboxEventQuerySet, store: BoundStore
                           ) -> dt.datetime | None:
    """Since when the oldest row a relay could claim now has been claimable, by the
    claim's own predicates (see :mod:`eventferry_django.store.claimable`); None when no
    row can be claimed."""
    since: list[dt.datetime] = []
    for kind, (sql, params) in store.dialect.claimable.probes().items():
        # The probe's columns: the id, then when the row became claimable.
        became_claimable = PROBE_COLUMNS[kind][1]
        since.extend(_utc(getattr(row, became_claimable)) for row in events.raw(sql, params))
    return min(since, default=None)


def oldest_pending_created_at(events: OutboxEventQuerySet) -> dt.datetime | None:
    """``created_at`` of the pending row with the smallest id and no retry time; if
    there is none, of the pending row due first.

    Both are the first ``status = 0`` entry of the claim index in its own order
    ``(status, next_retry_at, id)``: one index probe with ``LIMIT 1``. Where the
    database sorts NULLs first (MariaDB/MySQL, SQLite, SQL Server) that entry is the
    oldest row without a retry time whenever one exists; the condition repeats the
    claim index's own WHERE so that SQLite can match that partial index. Where NULLs
    sort last (PostgreSQL) those rows sit at the end of the range, so the query asks
    for ``next_retry_at IS NULL``, an index condition there (for which MariaDB sorts
    every pending row and SQLite scans the table), and falls back to the first entry
    when no such row exists. Pending rows with a retry time are scheduled events (see
    :mod:`eventferry_django.scheduling`); for the age that leaves them out, see
    :func:`oldest_claimable_since`.
    """
    first = events.pending().order_by("status", "next_retry_at", "id")
    # A feature flag, not a vendor name: it says where NULLs sit in an ascending index.
    if connections[events.db].features.nulls_order_largest:
        # Not narrowed to the open statuses as well: PostgreSQL multiplies the two
        # selectivities, expects next to no rows and sorts them all instead.
        found = list(first.filter(next_retry_at__isnull=True).values_list("created_at")[:1])
        found = found or list(first.values_list("created_at")[:1])
    else:
        found = list(first.filter(status__in=OPEN_STATUSES).values_list("created_at")[:1])
    return _utc(found[0][0]) if found else None


def last_published_at(events: OutboxEventQuerySet) -> dt.datetime | None:
    """``MAX(processed_at)`` of done rows, as the first entry of a backward scan of the
    retention index ``(status, processed_at)``."""
    latest = list(
        events.done().filter(processed_at__isnull=False)
        .order_by("-processed_at").values_list("processed_at", flat=True)[:1]
    )
    return _utc(latest[0]) if latest and latest[0] is not None else None


def topic_counts(events: OutboxEventQuerySet) -> dict[str, dict[str, int]]:
    """``{topic: {pending, scheduled, claimed, failed, dead}}`` for topics with open or
    dead rows, sorted by topic."""
    by_topic: dict[str, dict[str, int]] = {}

    def add(topic: str, column: str, n: int) -> None:
        by_topic.setdefault(topic, dict.fromkeys(TOPIC_COLUMNS, 0))[column] = n

    open_rows: Iterable[tuple[str, int, int]] = (
        _open(events).values_list("topic", "status").annotate(n=Count("*"))
        .values_list("topic", "status", "n")
    )
    for topic, status, n in open_rows:
        add(topic, STATUS_NAMES[status], n)
    for (topic, status), n in _in_flight(events, "topic").items():
        by_topic[topic][STATUS_NAMES[status]] -= n
        by_topic[topic]["claimed"] += n
    dead_rows: Iterable[tuple[str, int]] = (
        events.dead().order_by().values_list("topic").annotate(n=Count("*"))
        .values_list("topic", "n")
    )
    for topic, n in dead_rows:
        add(topic, "dead", n)
    scheduled_rows: Iterable[tuple[str, int]] = (
        events.scheduled().values_list("topic").annotate(n=Count("*"))
        .values_list("topic", "n")
    )
    for topic, n in scheduled_rows:
        by_topic[topic]["scheduled"] = n
        by_topic[topic]["pending"] -= n
    return dict(sorted(by_topic.items()))


def _utc(value: dt.datetime) -> dt.datetime:
    """The database writes UTC; a naive value (``USE_TZ = False``) is read as UTC."""
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


def _age(now: dt.datetime, then: dt.datetime) -> float:
    return max(0.0, (now - then).total_seconds())


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="milliseconds")


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


__all__ = [
    "BACKLOG_NAMES",
    "BACKLOG_STATUSES",
    "OPEN_STATUSES",
    "OutboxStatus",
    "backlog_counts",
    "last_published_at",
    "oldest_claimable_since",
    "oldest_pending_created_at",
    "outbox_status",
    "topic_counts",
]
