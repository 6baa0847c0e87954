"""Prometheus metrics. Every function here is a no-op when ``prometheus_client`` is not
installed (``pip install "eventferry-django[prometheus]"``).

Importing this module does nothing: the metrics below are created in prometheus_client's
default registry (the one django-prometheus's ``/metrics`` view and ``outbox_relay
--metrics-port`` serve) on first use, and no server is ever started unless asked for.

Counters and histograms (recorded by the process that does the work)
--------------------------------------------------------------------
=====================================  ========  =======================================
``eventferry_committed_total``         topic     events whose transaction committed
                                                 (``events_committed``; web/worker side)
``eventferry_published_total``         topic     events the relay delivered
``eventferry_retried_total``           topic     refused events scheduled for a retry
``eventferry_dead_total``              topic     events the relay gave up on (dead)
``eventferry_order_breaks_total``      topic     chains in which the broker refused a row
                                                 and confirmed a later one: that later
                                                 row was delivered before the refused
                                                 one (topic of the refused row)
``eventferry_redriven_total``          (none)    dead/failed rows moved back to pending
                                                 (``events_redriven``; whoever redrives:
                                                 admin, command, task). No topic: a
                                                 redrive is one bulk UPDATE and the signal
                                                 carries only the row count.
``eventferry_claim_seconds``           (none)    histogram: one claim statement (the
                                                 relay's first claim after idling)
``eventferry_settle_seconds``          (none)    histogram: acking/failing a batch; under
                                                 load this includes claiming the next
                                                 batch in the same transaction
``eventferry_publish_seconds``         (none)    histogram: handing one batch to the
                                                 publisher until it answered (confirms)
``eventferry_batch_size``              (none)    histogram: events per non-empty batch
``eventferry_inbox_handled_total``     consumer  messages a consumer handled for the
                                                 first time (counted on commit)
``eventferry_inbox_duplicates_total``  consumer  deliveries a consumer skipped: the
                                                 message was handled before
=====================================  ========  =======================================

Outcomes are counted as the relay decided them, once the batch was settled. Topics
become label values: keep their number bounded (a topic per customer is a cardinality
problem for Prometheus, not for eventferry).

Backlog gauges (read from the database when scraped)
----------------------------------------------------
``eventferry_backlog{database, status}`` (status ``pending``, ``scheduled``: pending
with a delivery time still ahead, ``claimed``, ``failed``),
``eventferry_dead_events{database}`` (dead rows now in the table; ``eventferry_dead``
would clash with the ``eventferry_dead_total`` counter's family name),
``eventferry_oldest_pending_age_seconds{database}`` (0 when nothing is pending),
``eventferry_oldest_claimable_age_seconds{database}`` (how long the oldest row a relay
could claim now has waited for one: scheduled rows, rows backing off before a retry and
the rows of their aggregates behind them are not claimable; 0 when none is: the one to
alert on),
``eventferry_last_published_timestamp_seconds{database}`` (absent until a done row
exists) and ``eventferry_status_up{database}`` (0 when the query failed; the other
gauges of that database are then absent). The queries are those of
:mod:`eventferry_django.status`, index-only and independent of the number of done rows.

They come from a collector that is registered only when asked for::

    # yourproject/apps.py: serve them from the web app's /metrics (django-prometheus)
    class YourConfig(AppConfig):
        def ready(self):
            from eventferry_django.metrics import register_backlog_collector
            register_backlog_collector()  # default registry, EVENTFERRY["DATABASE"]

``outbox_relay --metrics-port 9108`` registers it itself. Registering again, for the
same or another alias, is harmless: one collector per registry reports every alias
given. Every replica that serves it reports the same numbers, so aggregate the gauges
with ``max``, not ``sum``. prometheus_client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``)
builds its own registry per scrape: call ``register_backlog_collector(registry)`` on that
one, or let a relay serve the gauges.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import Counter as Tally
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .exceptions import ConfigurationError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter, Histogram
    from prometheus_client.metrics_core import GaugeMetricFamily, Metric

    from .status import OutboxStatus

logger = logging.getLogger(__name__)

PROMETHEUS_HINT = 'pip install "eventferry-django[prometheus]"'

#: From half a millisecond (a claim on loopback) to half a minute (a broker timing out).
SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_SIZE_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)

#: Where ``outbox_relay --metrics-port`` listens unless ``--metrics-addr`` says otherwise.
METRICS_ADDR = "127.0.0.1"

#: The backlog collector's metric names, for dashboards and tests.
BACKLOG_METRICS = (
    "eventferry_backlog",
    "eventferry_dead_events",
    "eventferry_oldest_pending_age_seconds",
    "eventferry_oldest_claimable_age_seconds",
    "eventferry_last_published_timestamp_seconds",
    "eventferry_status_up",
)


@dataclass(frozen=True)
class _Instruments:
    committed: Counter
    published: Counter
    retried: Counter
    dead: Counter
    order_breaks: Counter
    redriven: Counter
    claim_seconds: Histogram
    settle_seconds: Histogram
    publish_seconds: Histogram
    batch_size: Histogram
    inbox_handled: Counter
    inbox_duplicates: Counter


_lock = threading.Lock()
_created: _Instruments | None = None
_unavailable = False


def available() -> bool:
    """Whether prometheus_client can be imported (then the metrics record)."""
    return _instruments() is not None


def _instruments() -> _Instruments | None:
    """The metrics, created in the default registry on first use; None without
    prometheus_client."""
    global _created, _unavailable
    if _created is not None or _unavailable:
        return _created
    with _lock:
        if _created is None and not _unavailable:
            try:
                from prometheus_client import Counter, Histogram
            except ImportError:
                _unavailable = True
                return None
            _created = _Instruments(
                committed=Counter("eventferry_committed", "Events whose transaction "
                                  "committed, by topic.", ["topic"]),
                published=Counter("eventferry_published", "Events the relay delivered to "
                                  "the broker, by topic.", ["topic"]),
                retried=Counter("eventferry_retried", "Events the broker refused that were "
                                "scheduled for a retry, by topic.", ["topic"]),
                dead=Counter("eventferry_dead", "Events the relay gave up on, by topic.",
                             ["topic"]),
                order_breaks=Counter("eventferry_order_breaks", "Chains in which a later "
                                     "event was delivered before an earlier one the broker "
                                     "refused, by the refused event's topic.", ["topic"]),
                redriven=Counter("eventferry_redriven", "Dead or failed events moved back "
                                 "to pending."),
                claim_seconds=Histogram("eventferry_claim_seconds", "Time to claim a "
                                        "batch.", buckets=SECONDS_BUCKETS),
                settle_seconds=Histogram("eventferry_settle_seconds", "Time to settle a "
                                         "batch (and claim the next one with it, under "
                                         "load).", buckets=SECONDS_BUCKETS),
                publish_seconds=Histogram("eventferry_publish_seconds", "Time to publish a "
                                          "batch, broker confirms included.",
                                          buckets=SECONDS_BUCKETS),
                batch_size=Histogram("eventferry_batch_size", "Events per non-empty batch.",
                                     buckets=BATCH_SIZE_BUCKETS),
                inbox_handled=Counter("eventferry_inbox_handled", "Messages a consumer "
                                      "handled for the first time, by consumer.",
                                      ["consumer"]),
                inbox_duplicates=Counter("eventferry_inbox_duplicates", "Deliveries a "
                                         "consumer skipped because it had handled the "
                                         "message before, by consumer.", ["consumer"]),
            )
    return _created


# -- recording: cheap, and nothing at all without prometheus_client ------------------------
def observe_claim(seconds: float) -> None:
    if (m := _instruments()) is not None:
        m.claim_seconds.observe(seconds)


def observe_settle(seconds: float) -> None:
    if (m := _instruments()) is not None:
        m.settle_seconds.observe(seconds)


def observe_publish(seconds: float) -> None:
    if (m := _instruments()) is not None:
        m.publish_seconds.observe(seconds)


def observe_batch(size: int) -> None:
    if (m := _instruments()) is not None:
        m.batch_size.observe(size)


def count_outcomes(published: Iterable[str], failures: Iterable[tuple[str, bool]]) -> None:
    """Count a settled batch: topics of the delivered events, and (topic, dead) of the
    refused ones. The iterables are not consumed without prometheus_client."""
    if (m := _instruments()) is None:
        return
    for topic, n in Tally(published).items():
        m.published.labels(topic).inc(n)
    for (topic, dead), n in Tally(failures).items():
        (m.dead if dead else m.retried).labels(topic).inc(n)


def count_order_break(topic: str) -> None:
    if (m := _instruments()) is not None:
        m.order_breaks.labels(topic).inc()


def count_committed(topics: Iterable[str]) -> None:
    if (m := _instruments()) is None:
        return
    for topic, n in Tally(topics).items():
        m.committed.labels(topic).inc(n)


def count_redriven(rows: int) -> None:
    if (m := _instruments()) is not None and rows > 0:
        m.redriven.inc(rows)


def count_inbox_handled(consumer: str) -> None:
    if (m := _instruments()) is not None:
        m.inbox_handled.labels(consumer).inc()


def count_inbox_duplicate(consumer: str) -> None:
    if (m := _instruments()) is not None:
        m.inbox_duplicates.labels(consumer).inc()


def _on_events_committed(sender: object, *, topics: Iterable[str] = (), **kwargs: Any) -> None:
    count_committed(topics)


def _on_events_redriven(sender: object, *, count: int = 0, **kwargs: Any) -> None:
    count_redriven(count)


def connect_signals() -> bool:
    """Count ``events_committed`` and ``events_redriven``; the app's ``ready()`` calls
    this. Connects nothing without prometheus_client. Returns whether it connected."""
    if not available():
        return False
    from .signals import events_committed, events_redriven

    events_committed.connect(_on_events_committed, dispatch_uid="eventferry.metrics.committed")
    events_redriven.connect(_on_events_redriven, dispatch_uid="eventferry.metrics.redriven")
    return True


# -- backlog gauges, read when scraped ------------------------------------------------------
class BacklogCollector:
    """Reads :func:`eventferry_django.status.outbox_status` for each database alias on
    every scrape. Register it with :func:`register_backlog_collector`."""

    def __init__(self, using: str | None = None) -> None:
        #: Aliases in registration order; None stands for ``EVENTFERRY["DATABASE"]``.
        self._aliases: list[str | None] = [using]

    def add(self, using: str | None) -> None:
        if using not in self._aliases:
            self._aliases.append(using)

    @property
    def aliases(self) -> list[str]:
        """The aliases reported, ``None`` resolved, without repeats."""
        from .conf import get_settings

        resolved = [alias or get_settings().database for alias in self._aliases]
        return list(dict.fromkeys(resolved))

    @staticmethod
    def _families() -> dict[str, GaugeMetricFamily]:
        from prometheus_client.metrics_core import GaugeMetricFamily

        return {
            "backlog": GaugeMetricFamily(
                "eventferry_backlog", "Outbox rows waiting to be delivered, by status "
                "(pending, scheduled: pending with a delivery time ahead, claimed: in "
                "flight, failed: retry scheduled).",
                labels=["database", "status"]),
            "dead": GaugeMetricFamily(
                "eventferry_dead_events", "Dead outbox rows (given up on, awaiting a "
                "redrive or a purge).", labels=["database"]),
            "oldest": GaugeMetricFamily(
                "eventferry_oldest_pending_age_seconds", "Age of the oldest pending "
                "outbox row; 0 when none is pending.", labels=["database"]),
            "claimable": GaugeMetricFamily(
                "eventferry_oldest_claimable_age_seconds", "How long the oldest outbox "
                "row a relay could claim now has waited (scheduled rows and retries not "
                "yet due excluded); 0 when none is claimable.", labels=["database"]),
            "last": GaugeMetricFamily(
                "eventferry_last_published_timestamp_seconds", "When the most recently "
                "delivered outbox row was settled (Unix time).", labels=["database"]),
            "up": GaugeMetricFamily(
                "eventferry_status_up", "1 when the outbox status query succeeded.",
                labels=["database"]),
        }

    def describe(self) -> Iterator[Metric]:
        """The names, without touching the database (the registry asks at registration)."""
        yield from self._families().values()

    def collect(self) -> Iterator[Metric]:
        families = self._families()
        for alias in self.aliases:
            status = _read_status(alias)
            families["up"].add_metric([alias], 0.0 if status is None else 1.0)
            if status is None:
                continue
            for name, count in status.backlog.items():
                families["backlog"].add_metric([alias, name], float(count))
            families["dead"].add_metric([alias], float(status.dead))
            families["oldest"].add_metric([alias], status.oldest_pending_age_seconds or 0.0)
            families["claimable"].add_metric([alias], status.oldest_claimable_age_seconds)
            if status.last_published_at is not None:
                families["last"].add_metric([alias], status.last_published_at.timestamp())
        yield from families.values()


def _read_status(alias: str) -> OutboxStatus | None:
    """The status of ``alias``, or None (logged) when it cannot be read: a scrape must
    not fail because the database is away.

    Scrapes run in threads of their own (prometheus_client's server starts one per
    request), so a connection opened here is closed here, not left to the thread.
    """
    from django.db import connections

    from .status import outbox_status

    connection = connections[alias]
    opened_here = connection.connection is None
    try:
        return outbox_status(alias)
    except Exception:
        logger.warning("cannot read the outbox status of database %r", alias, exc_info=True)
        return None
    finally:
        if opened_here and not connection.in_atomic_block:
            connection.close()


_collectors: weakref.WeakKeyDictionary[Any, BacklogCollector] = weakref.WeakKeyDictionary()


def register_backlog_collector(
    registry: CollectorRegistry | None = None, using: str | None = None
) -> BacklogCollector | None:
    """Report the backlog gauges of ``using`` (default ``EVENTFERRY["DATABASE"]``) from
    ``registry`` (default: prometheus_client's, which django-prometheus serves).

    Call it from an ``AppConfig.ready()`` or ``urls.py``; it queries nothing until
    scraped. Idempotent per registry and alias. Returns the collector, or None without
    prometheus_client.
    """
    if not available():
        return None
    from prometheus_client import REGISTRY

    target = REGISTRY if registry is None else registry
    with _lock:
        collector = _collectors.get(target)
        if collector is None:
            collector = BacklogCollector(using)
            target.register(collector)
            _collectors[target] = collector
        else:
            collector.add(using)
    return collector


def unregister_backlog_collector(registry: CollectorRegistry | None = None) -> bool:
    """Stop reporting the backlog gauges from ``registry`` (default: prometheus_client's).
    Returns whether a collector was registered there."""
    if not available():
        return False
    from prometheus_client import REGISTRY

    target = REGISTRY if registry is None else registry
    with _lock:
        collector = _collectors.pop(target, None)
        if collector is None:
            return False
        target.unregister(collector)
    return True


def start_metrics_server(port: int, *, addr: str = METRICS_ADDR, using: str | None = None
                         ) -> None:
    """Serve the default registry, backlog gauges of ``using`` included, on
    ``http://addr:port/metrics`` from a daemon thread; ``outbox_relay --metrics-port``
    calls this. ``addr`` is loopback unless told otherwise: metrics reach no other
    machine by accident. Raises :class:`ConfigurationError` without prometheus_client,
    and ``OSError`` when the address cannot be bound."""
    if not available():
        raise ConfigurationError(
            f"Serving metrics needs prometheus_client, which is not installed: {PROMETHEUS_HINT}"
        )
    from prometheus_client import REGISTRY, start_http_server

    start_http_server(port, addr=addr, registry=REGISTRY)
    # Registered once the port is ours: a failed start leaves the registry as it was.
    register_backlog_collector(REGISTRY, using)
    logger.info("serving Prometheus metrics on http://%s:%d/metrics", addr, port)


__all__ = [
    "BACKLOG_METRICS",
    "METRICS_ADDR",
    "BacklogCollector",
    "available",
    "connect_signals",
    "count_committed",
    "count_inbox_duplicate",
    "count_inbox_handled",
    "count_outcomes",
    "count_redriven",
    "observe_batch",
    "observe_claim",
    "observe_publish",
    "observe_settle",
    "register_backlog_collector",
    "start_metrics_server",
    "unregister_backlog_collector",
]
