"""Prometheus metrics: the relay's counters and histograms, the signal-fed counters, the
backlog collector on the real database, ``outbox_relay --metrics-port`` as a real process
scraped over HTTP, the no-op path without prometheus_client, and the contrib dashboard
and alert rules."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings as django_settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections, transaction
from django.test import RequestFactory, override_settings
from django.utils import timezone
from django_prometheus.exports import ExportToDjangoView
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from eventferry_django import NewEvent, publish_events
from eventferry_django.conf import get_settings
from eventferry_django.contract import bucket_of
from eventferry_django.maintenance import RedriveSelection, redrive
from eventferry_django.metrics import (
    BACKLOG_METRICS,
    BacklogCollector,
    connect_signals,
    register_backlog_collector,
    unregister_backlog_collector,
)
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.publishers.base import OutboundMessage, Outcome, Publisher, PublishResult
from eventferry_django.relay import Relay, RelayConfig
from eventferry_django.store.in_flight_journal import InFlightJournal

from .engine_gaps import babelfish_gap
from .relay_process import ROOT, start_relay, wait_until

FILE_PUBLISHER = "tests.process_publishers.FilePublisher"
HOUR = 3600.0


def sample(name: str, registry: CollectorRegistry = REGISTRY, **labels: str) -> float:
    """A sample's value, 0 when it does not exist (yet)."""
    return registry.get_sample_value(name, labels) or 0.0


def add(topic: str, aggregate: str, **fields: Any) -> OutboxEvent:
    """One outbox row, written by publish_event or, in another state, in that state at
    once: a relay running meanwhile never sees (and settles) it pending first."""
    if not fields:
        with transaction.atomic():
            (message_id,) = publish_events([NewEvent(topic, {}, "order", aggregate)])
        return OutboxEvent.objects.get(message_id=message_id)
    return OutboxEvent.objects.create(
        message_id=str(uuid.uuid4()), topic=topic, aggregate_type="order",
        aggregate_id=aggregate, payload="{}", bucket=bucket_of(aggregate), **fields)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


# -- counters fed by signals ---------------------------------------------------------
@pytest.fixture
def counting() -> None:
    """The receivers the app connects in ready(); connected again (a no-op when they still
    are) because other tests clear ``events_committed.receivers``."""
    assert connect_signals() is True


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("counting")
def test_committed_events_are_counted_by_topic_after_commit_only() -> None:
    before = {t: sample("eventferry_committed_total", topic=t) for t in ("m.orders", "m.mail")}
    with transaction.atomic():
        publish_events([NewEvent("m.orders", {}, "order", str(n)) for n in range(3)]
                       + [NewEvent("m.mail", {}, "mail", "1")])
    assert sample("eventferry_committed_total", topic="m.orders") == before["m.orders"] + 3
    assert sample("eventferry_committed_total", topic="m.mail") == before["m.mail"] + 1

    with pytest.raises(ZeroDivisionError), transaction.atomic():
        publish_events([NewEvent("m.orders", {}, "order", "9")])
        1 / 0  # noqa: B018
    assert sample("eventferry_committed_total", topic="m.orders") == before["m.orders"] + 3


@pytest.mark.django_db
@pytest.mark.usefixtures("counting")
def test_redriven_rows_are_counted() -> None:
    for n in range(3):
        add("m.redrive", str(n), status=Status.DEAD, processed_at=timezone.now(), attempts=5)
    before = sample("eventferry_redriven_total")
    assert redrive(RedriveSelection(topic="m.redrive")).rows == 3
    assert sample("eventferry_redriven_total") == before + 3
    assert redrive(RedriveSelection(topic="m.redrive")).rows == 0
    assert sample("eventferry_redriven_total") == before + 3


# -- the relay's own metrics, in-process ------------------------------------------------
class ScriptedPublisher(Publisher):
    """OK, except the topics it is told to refuse (RETRY) or to give up on (GIVE_UP)."""

    def __init__(self, outcomes: dict[str, Outcome]) -> None:
        super().__init__()
        self.outcomes = outcomes

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        return [PublishResult(self.outcomes.get(m.topic, Outcome.OK), "refused")
                for m in messages]


@pytest.mark.django_db(transaction=True)
def test_relay_counts_outcomes_by_topic_and_times_its_steps() -> None:
    names = ("eventferry_claim_seconds_count", "eventferry_publish_seconds_count",
             "eventferry_settle_seconds_count", "eventferry_batch_size_count",
             "eventferry_batch_size_sum")
    before = {name: sample(name) for name in names}
    outcomes = {("eventferry_published_total", "m.ok"), ("eventferry_retried_total", "m.retry"),
                ("eventferry_dead_total", "m.dead"), ("eventferry_published_total", "m.retry")}
    counted = {key: sample(key[0], topic=key[1]) for key in outcomes}
    with transaction.atomic():
        publish_events([NewEvent("m.ok", {}, "a", f"ok-{n}") for n in range(4)]
                       + [NewEvent("m.retry", {}, "b", f"retry-{n}") for n in range(2)]
                       + [NewEvent("m.dead", {}, "c", "dead-1")])
    # The retries wait far longer than any pass takes, so the run ends with them pending
    # however slow the database is (a one-second backoff made a slow pass retry them again).
    slow_retries = {**django_settings.EVENTFERRY,
                    "BACKOFF": {"BASE": 300.0, "MAX": 300.0, "JITTER": 0.0}}
    with override_settings(EVENTFERRY=slow_retries):
        settings = get_settings()
        relay = Relay(RelayConfig(batch_size=100, until_empty=True, claim_timeout=60,
                                  max_attempts=settings.max_attempts),
                      publisher=ScriptedPublisher({"m.retry": Outcome.RETRY,
                                                   "m.dead": Outcome.GIVE_UP}))
        stats = relay.run()
    assert (stats.published, stats.retried, stats.dead) == (4, 2, 1)

    def delta(name: str, topic: str) -> float:
        return sample(name, topic=topic) - counted[(name, topic)]

    assert delta("eventferry_published_total", "m.ok") == 4
    assert delta("eventferry_retried_total", "m.retry") == 2
    assert delta("eventferry_dead_total", "m.dead") == 1
    assert delta("eventferry_published_total", "m.retry") == 0
    # One batch of 7 (the second claim of the start finds nothing more); the claim made
    # with its settlement finds nothing (retries wait for their time).
    assert sample("eventferry_batch_size_count") - before["eventferry_batch_size_count"] == 1
    assert sample("eventferry_batch_size_sum") - before["eventferry_batch_size_sum"] == 7
    assert sample("eventferry_publish_seconds_count") \
        - before["eventferry_publish_seconds_count"] == 1
    assert sample("eventferry_settle_seconds_count") \
        - before["eventferry_settle_seconds_count"] == 1
    assert sample("eventferry_claim_seconds_count") - before["eventferry_claim_seconds_count"] >= 1


# -- the backlog collector ------------------------------------------------------------------
@pytest.fixture
def registry() -> Iterator[CollectorRegistry]:
    fresh = CollectorRegistry()
    yield fresh
    unregister_backlog_collector(fresh)


@pytest.mark.django_db
def test_registering_queries_nothing_and_is_idempotent(
    registry: CollectorRegistry, django_assert_num_queries: Any
) -> None:
    with django_assert_num_queries(0):
        collector = register_backlog_collector(registry)
        assert register_backlog_collector(registry) is collector
        assert register_backlog_collector(registry, using="default") is collector
    assert isinstance(collector, BacklogCollector)
    assert collector.aliases == ["default"]
    families = [f for f in registry.collect() if f.name.startswith("eventferry_")]
    assert sorted(f.name for f in families) == sorted(BACKLOG_METRICS)
    # One sample per series: "default" given twice (once as None) is reported once.
    up = next(f for f in families if f.name == "eventferry_status_up")
    assert [(s.labels, s.value) for s in up.samples] == [({"database": "default"}, 1.0)]
    assert unregister_backlog_collector(registry) is True
    assert unregister_backlog_collector(registry) is False
    assert not [f for f in registry.collect() if f.name.startswith("eventferry_")]


@pytest.mark.django_db
def test_backlog_gauges_read_the_database_when_scraped(registry: CollectorRegistry) -> None:
    register_backlog_collector(registry)
    assert sample("eventferry_backlog", registry, database="default", status="pending") == 0
    assert sample("eventferry_oldest_pending_age_seconds", registry, database="default") == 0
    assert sample("eventferry_oldest_claimable_age_seconds", registry, database="default") == 0
    assert registry.get_sample_value("eventferry_last_published_timestamp_seconds",
                                     {"database": "default"}) is None

    now = timezone.now()
    add("m.t", "1", created_at=now - timezone.timedelta(hours=1))
    add("m.t", "2")
    in_flight = add("m.t", "3")
    with transaction.atomic(), connection.cursor() as cursor:
        InFlightJournal().record(cursor, "b:metrics-test", 1, [in_flight.id])
    add("m.t", "4", status=Status.FAILED, attempts=1, next_retry_at=now)
    add("m.t", "5", status=Status.DEAD, processed_at=now, attempts=5)
    done = add("m.t", "6", status=Status.DONE, processed_at=now)
    add("m.t", "7", next_retry_at=now + timezone.timedelta(days=2),
        created_at=now - timezone.timedelta(hours=5))  # scheduled ahead

    def value(name: str, **labels: str) -> float:
        return sample(name, registry, database="default", **labels)

    assert value("eventferry_backlog", status="pending") == 2
    assert value("eventferry_backlog", status="scheduled") == 1
    assert value("eventferry_backlog", status="claimed") == 1
    assert value("eventferry_backlog", status="failed") == 1
    assert value("eventferry_dead_events") == 1
    assert value("eventferry_oldest_pending_age_seconds") == pytest.approx(HOUR, abs=60)
    assert value("eventferry_oldest_claimable_age_seconds") == pytest.approx(HOUR, abs=60)
    assert value("eventferry_last_published_timestamp_seconds") == pytest.approx(
        done.processed_at.timestamp(), abs=0.001)
    assert value("eventferry_status_up") == 1


def collect_in_thread(registry: CollectorRegistry) -> tuple[dict[tuple[str, str], float], bool]:
    """Scrape from a thread of its own, as prometheus_client's server does; also says
    whether that thread was left holding a database connection."""
    values: dict[tuple[str, str], float] = {}
    left_open: list[bool] = []

    def scrape() -> None:
        for family in registry.collect():
            for s in family.samples:
                values[(s.name, s.labels.get("status", ""))] = s.value
        left_open.append(connections["default"].connection is not None)

    thread = threading.Thread(target=scrape)
    thread.start()
    thread.join(30)
    return values, left_open == [True]


@pytest.mark.django_db(transaction=True)
def test_a_scrape_thread_closes_the_connection_it_opened(registry: CollectorRegistry) -> None:
    add("m.t", "1")
    register_backlog_collector(registry)
    values, left_open = collect_in_thread(registry)
    assert values[("eventferry_backlog", "pending")] == 1
    assert values[("eventferry_status_up", "")] == 1
    assert not left_open


@pytest.mark.django_db(transaction=True)
def test_an_unreachable_database_reports_down_instead_of_failing_the_scrape(
    registry: CollectorRegistry, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    register_backlog_collector(registry)
    # New connections (the scrape thread's) go nowhere; this thread's stays as it is.
    database = connections.settings["default"]
    if connections["default"].vendor == "sqlite":
        monkeypatch.setitem(database, "NAME", str(tmp_path / "missing" / "db.sqlite3"))
    else:
        monkeypatch.setitem(database, "HOST", "127.0.0.1")
        monkeypatch.setitem(database, "PORT", "1")
    values, _ = collect_in_thread(registry)
    assert values == {("eventferry_status_up", ""): 0.0}
    assert "cannot read the outbox status of database 'default'" in caplog.text


@pytest.mark.django_db
def test_django_prometheus_metrics_view_shows_the_backlog() -> None:
    add("m.view", "1")
    register_backlog_collector()  # the default registry, which the view serves
    try:
        response = ExportToDjangoView(RequestFactory().get("/metrics"))
    finally:
        unregister_backlog_collector()
    body = response.content.decode()
    assert 'eventferry_backlog{database="default",status="pending"} 1.0' in body
    assert 'eventferry_status_up{database="default"} 1.0' in body
    assert "eventferry_dead_events" in body
    assert "# TYPE eventferry_published_total counter" in body


# -- outbox_relay --metrics-port ------------------------------------------------------
@pytest.mark.parametrize("port", ["0", "65536", "http"])
def test_metrics_port_is_validated(port: str) -> None:
    with pytest.raises(CommandError, match="--metrics-port"):
        call_command("outbox_relay", "--once", "--metrics-port", port)


def test_metrics_port_help_shows_the_default() -> None:
    from django.core.management import load_command_class

    parser = load_command_class("eventferry_django", "outbox_relay").create_parser(
        "manage.py", "outbox_relay")
    text = " ".join(parser.format_help().split())
    assert "--metrics-port PORT" in text and "(default: off)" in text


def test_metrics_addr_needs_a_port_and_its_default_is_loopback() -> None:
    from django.core.management import load_command_class

    with pytest.raises(CommandError, match="--metrics-addr needs --metrics-port"):
        call_command("outbox_relay", "--once", "--metrics-addr", "0.0.0.0")
    parser = load_command_class("eventferry_django", "outbox_relay").create_parser(
        "manage.py", "outbox_relay")
    text = " ".join(parser.format_help().split())
    assert "--metrics-addr ADDR" in text and "(default: 127.0.0.1, this machine only)" in text


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_metrics_listen_on_loopback_unless_told_otherwise(tmp_path: Path) -> None:
    # All of 127.0.0.0/8 is this machine on Linux: a server bound to one loopback address
    # does not answer on another, as it would if it listened on every interface.
    settings = {"PUBLISHER": {"BACKEND": FILE_PUBLISHER,
                              "OPTIONS": {"path": str(tmp_path / "published.jsonl")}}}
    default_port, chosen_port = free_port(), free_port()
    relays = [
        start_relay(settings, "--metrics-port", str(default_port), log=tmp_path / "a.log"),
        start_relay(settings, "--metrics-port", str(chosen_port), "--metrics-addr",
                    "127.0.0.2", log=tmp_path / "b.log"),
    ]
    try:
        # The server answers before the relay's first look at the outbox, and the status
        # is there from that look on.
        for host, port in (("127.0.0.1", default_port), ("127.0.0.2", chosen_port)):
            wait_until(lambda host=host, port=port: metric(
                scrape(port, host=host), "eventferry_status_up", database="default") == 1,
                timeout=30, what=f"eventferry_status_up on {host}:{port}")
        for host, port in (("127.0.0.2", default_port), ("127.0.0.1", chosen_port)):
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((host, port), timeout=5).close()
    finally:
        for relay in relays:
            relay.send_signal(signal.SIGTERM)
        for relay in relays:
            relay.wait(30)


def test_a_busy_metrics_port_is_a_command_error() -> None:
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(CommandError, match=f"Cannot serve metrics on port {port}"):
            call_command("outbox_relay", "--once", "--metrics-port", str(port))


def scrape(port: str | int, timeout: float = 30.0, host: str = "127.0.0.1"
           ) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """``{(sample name, labels): value}`` from ``http://host:port/metrics``, waiting
    for the server to come up."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


def metric(values: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str,
           **labels: str) -> float | None:
    return values.get((name, frozenset(labels.items())))


@babelfish_gap("slow-start-up", "a relay process's first claim compiles for seconds there, past the test's wait for it to publish everything")
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_relay_process_serves_its_metrics_and_the_backlog(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "relay.log"
    with transaction.atomic():
        publish_events([NewEvent("m.orders", {"n": n}, "order", str(n)) for n in range(5)]
                       + [NewEvent("m.payments", {"n": n}, "payment", str(n)) for n in range(2)])
    relay = start_relay(
        {"PUBLISHER": {"BACKEND": FILE_PUBLISHER,
                       "OPTIONS": {"path": str(tmp_path / "published.jsonl")}}},
        "--metrics-port", str(port), "--poll-interval", "0.2", log=log,
    )
    try:
        wait_until(lambda: OutboxEvent.objects.done().count() == 7 or relay.poll() is not None,
                   what="the relay to publish everything")
        assert relay.poll() is None, log.read_text()
        # Counted after settling: scrape until the last batch shows.
        wait_until(lambda: metric(scrape(port), "eventferry_published_total",
                                  topic="m.payments") == 2, what="the counters")
        values = scrape(port)
        assert metric(values, "eventferry_published_total", topic="m.orders") == 5
        assert metric(values, "eventferry_published_total", topic="m.payments") == 2
        assert metric(values, "eventferry_retried_total", topic="m.orders") is None
        assert metric(values, "eventferry_batch_size_sum") == 7
        assert (metric(values, "eventferry_batch_size_count") or 0) >= 1
        assert (metric(values, "eventferry_claim_seconds_count") or 0) >= 1
        assert (metric(values, "eventferry_publish_seconds_count") or 0) >= 1
        # The backlog, read from the test database by the relay process.
        db = {"database": "default"}
        for status in ("pending", "scheduled", "claimed", "failed"):
            assert metric(values, "eventferry_backlog", status=status, **db) == 0
        assert metric(values, "eventferry_dead_events", **db) == 0
        assert metric(values, "eventferry_oldest_pending_age_seconds", **db) == 0
        assert metric(values, "eventferry_oldest_claimable_age_seconds", **db) == 0
        assert metric(values, "eventferry_status_up", **db) == 1
        last = metric(values, "eventferry_last_published_timestamp_seconds", **db)
        assert last is not None and abs(time.time() - last) < 60

        # Rows the relay cannot take: a dead one, a failed one waiting for its retry time
        # and, behind it in the same aggregate, a pending one enqueued an hour ago.
        now = timezone.now()
        add("m.orders", "dead", status=Status.DEAD, processed_at=now, attempts=5)
        add("m.orders", "held", status=Status.FAILED, attempts=1,
            next_retry_at=now + timezone.timedelta(hours=1))
        add("m.orders", "held", created_at=now - timezone.timedelta(hours=1))
        values = scrape(port)
        assert metric(values, "eventferry_dead_events", **db) == 1
        assert metric(values, "eventferry_backlog", status="failed", **db) == 1
        assert metric(values, "eventferry_backlog", status="pending", **db) == 1
        age = metric(values, "eventferry_oldest_pending_age_seconds", **db)
        assert age == pytest.approx(HOUR, abs=60)
        # None of them could be claimed now: nothing for the alert to fire on.
        assert metric(values, "eventferry_oldest_claimable_age_seconds", **db) == 0
    finally:
        relay.send_signal(signal.SIGTERM)
        relay.wait(30)
    assert relay.returncode == 0, log.read_text()
    assert f"serving Prometheus metrics on http://127.0.0.1:{port}/metrics" in log.read_text()


# -- without prometheus_client ------------------------------------------------------
NO_PROMETHEUS = """
import sys
sys.modules["prometheus_client"] = None  # as if it were not installed
import django
django.setup()
from django.core.management import call_command
from django.core.management.base import CommandError
from eventferry_django import metrics
from eventferry_django.exceptions import ConfigurationError

assert metrics.available() is False
assert metrics.connect_signals() is False
metrics.observe_claim(0.1); metrics.observe_publish(0.1); metrics.observe_settle(0.1)
metrics.observe_batch(3)
def never():
    raise AssertionError("consumed")
    yield
metrics.count_outcomes(never(), never())
metrics.count_committed(never())
metrics.count_redriven(3)
metrics.count_inbox_handled("c"); metrics.count_inbox_duplicate("c")
assert metrics.register_backlog_collector() is None
assert metrics.unregister_backlog_collector() is False
try:
    metrics.start_metrics_server(1)
except ConfigurationError as exc:
    assert 'pip install "eventferry-django[prometheus]"' in str(exc), exc
else:
    raise AssertionError("start_metrics_server did not raise")
try:
    call_command("outbox_relay", "--once", "--metrics-port", "9")
except CommandError as exc:
    assert "needs prometheus_client" in str(exc), exc
else:
    raise AssertionError("outbox_relay did not refuse --metrics-port")
print("no-op ok")
"""


def run_python(code: str, tmp_path: Path) -> str:
    """Run ``code`` in a fresh interpreter on the test settings; return its stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "tests.settings",
           "EVENTFERRY_TEST_DB": "sqlite", "EVENTFERRY_SQLITE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_without_prometheus_client_metrics_are_no_ops(tmp_path: Path) -> None:
    assert run_python(NO_PROMETHEUS, tmp_path) == "no-op ok"


QUIET_IMPORT = """
import threading, prometheus_client
before = {m.name for m in prometheus_client.REGISTRY.collect()}
import eventferry_django.metrics
after = {m.name for m in prometheus_client.REGISTRY.collect()}
assert after == before, after - before
assert threading.active_count() == 1, threading.enumerate()

# The app's ready() connects the counting receivers; still no server, no query.
import django
django.setup()
from eventferry_django.signals import events_committed, events_redriven
assert events_committed.disconnect(dispatch_uid="eventferry.metrics.committed")
assert events_redriven.disconnect(dispatch_uid="eventferry.metrics.redriven")
assert threading.active_count() == 1, threading.enumerate()
print("quiet")
"""


def test_importing_metrics_creates_and_starts_nothing(tmp_path: Path) -> None:
    assert run_python(QUIET_IMPORT, tmp_path) == "quiet"


# -- contrib: Grafana dashboard and Prometheus alert rules -------------------------------
CONTRIB = ROOT / "contrib"
#: Every metric name eventferry exposes, with the suffixes Prometheus adds.
KNOWN = {
    *BACKLOG_METRICS,
    *(f"eventferry_{c}_total" for c in ("committed", "published", "retried", "dead",
                                         "redriven")),
    *(f"eventferry_{h}_{suffix}" for h in ("claim_seconds", "settle_seconds",
                                           "publish_seconds", "batch_size")
      for suffix in ("bucket", "sum", "count")),
}


def names_in(expression: str) -> set[str]:
    return set(re.findall(r"\beventferry_[a-z_]+\b", expression))


def test_alert_rules_parse_and_use_known_metrics() -> None:
    rules = yaml.safe_load((CONTRIB / "prometheus" / "eventferry-alerts.yml").read_text())
    (group,) = rules["groups"]
    alerts = {rule["alert"]: rule for rule in group["rules"]}
    assert {"EventferryRelayStuck", "EventferryDeadEvents", "EventferryOldestClaimableTooOld",
            "EventferryStatusDown"} <= set(alerts)
    # The age alerts go by what a relay could claim: never by scheduled events.
    for name in ("EventferryRelayStuck", "EventferryOldestClaimableTooOld"):
        assert "eventferry_oldest_claimable_age_seconds" in alerts[name]["expr"], name
        assert "eventferry_backlog" not in alerts[name]["expr"], name
    for name, rule in alerts.items():
        assert set(rule) >= {"expr", "for", "labels", "annotations"}, name
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert {"summary", "description"} <= set(rule["annotations"]), name
        used = names_in(rule["expr"])
        assert used and used <= KNOWN, (name, used - KNOWN)
        assert re.fullmatch(r"\d+[smh]", rule["for"]), name


def test_grafana_dashboard_parses_and_charts_known_metrics() -> None:
    dashboard = json.loads((CONTRIB / "grafana" / "eventferry-dashboard.json").read_text())
    panels = [p for p in dashboard["panels"] if p.get("type") != "row"]
    titles = {p["title"] for p in panels}
    assert {"Published / s by topic", "Dead / s by topic", "Backlog by status",
            "Oldest claimable", "Oldest pending and claimable age", "Claim latency", "Publish latency",
            "Batch size"} <= titles
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    used: set[str] = set()
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            found = names_in(target["expr"])
            assert found, (panel["title"], target["expr"])
            used |= found
    assert used <= KNOWN, used - KNOWN
    assert {"eventferry_published_total", "eventferry_dead_total", "eventferry_backlog",
            "eventferry_oldest_pending_age_seconds", "eventferry_oldest_claimable_age_seconds",
            "eventferry_claim_seconds_bucket",
            "eventferry_publish_seconds_bucket", "eventferry_batch_size_bucket"} <= used
