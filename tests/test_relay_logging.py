"""What the relay logs: a start-up line, every retried and every dead event, progress
while it works and a stop line, through loggers named after their modules."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test import override_settings

from eventferry_django import NewEvent, publish_event, publish_events
from eventferry_django import relay as relay_module
from eventferry_django.conf import get_settings
from eventferry_django.publishers.base import Outcome, mask_url
from eventferry_django.publishers.kombu import KombuPublisher
from eventferry_django.publishers.logging import LoggingPublisher
from eventferry_django.publishers.memory import InMemoryPublisher
from eventferry_django.relay import Relay, RelayConfig
from eventferry_django.store import dialect_for

from .relay_process import relay_env
from .test_relay import FAST_BACKOFF, ScriptedPublisher

LOGGER = "eventferry_django.relay"


@pytest.fixture(autouse=True)
def _fast_backoff() -> Iterator[None]:
    InMemoryPublisher.reset()
    with override_settings(EVENTFERRY={**FAST_BACKOFF, "MAX_ATTEMPTS": 2}):
        yield


def relay(publisher: Any = None, **config: Any) -> Relay:
    options: dict[str, Any] = {"batch_size": 50, "relay_id": "r1", "error_backoff": 0.01,
                               "max_attempts": get_settings().max_attempts}
    options.update(config)
    return Relay(RelayConfig(**options), publisher=publisher)


def lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


@pytest.mark.parametrize(("url", "masked"), [
    ("amqp://guest:s3cret@localhost:5672//", "amqp://guest:****@localhost:5672//"),
    ("redis://:s3cret@127.0.0.1:6379/0", "redis://:****@127.0.0.1:6379/0"),
    ("amqp://u:p@ss@h1//;amqp://u:s3cret@h2//", "amqp://u:****@h1//;amqp://u:****@h2//"),
    ("amqp://guest@localhost//", "amqp://guest@localhost//"),
    ("memory://", "memory://"),
])
def test_mask_url_hides_passwords(url: str, masked: str) -> None:
    assert mask_url(url) == masked


@pytest.mark.django_db
def test_start_up_line_says_where_and_how_without_the_password() -> None:
    publisher = KombuPublisher(url="amqp://shop:s3cret@127.0.0.1:5672//", exchange="shop")
    described = relay(publisher, batch_size=7, batches_in_flight=1, poll_interval=0.5,
                      max_events=1000, until_empty=True).describe()
    table = dialect_for(connection.vendor, get_settings().table_name).table
    assert described == (
        f"database 'default' ({connection.vendor}), table {table}, publisher KombuPublisher "
        "amqp://shop:****@127.0.0.1:5672// exchange 'shop' (topic), batch size 7, 1 "
        "batch(es) in flight, claim timeout 60s, max attempts 2, poll interval 0.5s; "
        "returns when nothing is claimable or after 1,000 events"
    )
    assert LoggingPublisher().describe() == (
        "LoggingPublisher (logger 'eventferry_django.published')")


@pytest.mark.django_db(transaction=True)
def test_every_retry_at_info_and_every_dead_event_at_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with transaction.atomic():
        bad = publish_event("bad", {}, aggregate_type="order", aggregate_id="o-1")
        publish_event("good", {}, aggregate_type="order", aggregate_id="o-2")
    caplog.set_level(logging.INFO, logger="eventferry_django")
    stats = relay(ScriptedPublisher({"bad": Outcome.RETRY}), max_events=3).run()
    assert (stats.published, stats.retried, stats.dead) == (1, 1, 1)

    [retry] = [r for r in caplog.records if r.name == LOGGER and "failed attempt" in r.msg]
    assert retry.levelno == logging.INFO
    assert retry.getMessage().startswith(
        f"[r1] event {bad} failed attempt 1 of 2, retrying in 0.0s: topic bad, aggregate "
        "order/o-1, outbox row ")
    assert retry.getMessage().endswith(": bad refused")
    [dead] = lines(caplog, logging.ERROR)
    assert dead.startswith(f"[r1] event {bad} is dead after 2 attempt(s): topic bad, "
                           "aggregate order/o-1, outbox row ")
    assert dead.endswith(": bad refused")
    record = next(r for r in caplog.records if r.levelno == logging.ERROR)
    assert (record.message_id, record.topic, record.aggregate_type, record.aggregate_id,  # type: ignore[attr-defined]
            record.attempt, record.error, record.relay_id) == (  # type: ignore[attr-defined]
        bad, "bad", "order", "o-1", 2, "bad refused", "r1")


@pytest.mark.django_db(transaction=True)
def test_start_progress_and_stop_lines(caplog: pytest.LogCaptureFixture) -> None:
    with transaction.atomic():
        publish_events([NewEvent("t", {}, "a", str(n)) for n in range(5)])
    caplog.set_level(logging.INFO, logger="eventferry_django")
    worker = relay(batch_size=2, batches_in_flight=1, until_empty=True, progress_interval=0.0)
    worker.run()
    info = lines(caplog, logging.INFO)
    assert info[0] == f"[r1] starting: {worker.describe()}"
    progress = [line for line in info if "in the last" in line]
    # One line per pass that did something; the last, empty pass stays quiet.
    assert len(progress) == 3
    assert progress[0].startswith("[r1] 2 published, 0 retried, 0 dead, 0 released, "
                                  "0 outage(s) in the last ")
    assert progress[-1].endswith("; 5 published since start")
    assert info[-1] == ("[r1] stopped: 5 published, 0 retried, 0 dead, 0 released in 4 "
                        "passes, 0 outage(s)")

    caplog.clear()
    worker.run()  # a Relay says where it works once, however often it runs
    assert [line for line in lines(caplog, logging.INFO) if "starting" in line] == []


@pytest.mark.django_db(transaction=True)
def test_a_quiet_level_costs_no_formatting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The relay's hot path: with INFO off, a retried event is never even handed to the
    logger, so no message or record is built for it."""
    with transaction.atomic():
        publish_events([NewEvent("bad", {}, "a", str(n)) for n in range(20)])
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(relay_module.logger, "info", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(relay_module.logger, "level", logging.WARNING)
    stats = relay(ScriptedPublisher({"bad": Outcome.RETRY}), max_events=20).run()
    assert stats.retried == 20
    assert not [call for call in calls if "failed attempt" in call[0]]


@pytest.mark.django_db(transaction=True)
def test_the_command_logs_to_stderr_when_logging_is_not_configured() -> None:
    """A relay started by hand in a project without LOGGING says what it does."""
    with transaction.atomic():
        publish_event("t", {}, aggregate_type="a", aggregate_id="1")
    result = subprocess.run(
        [sys.executable, "-m", "django", "outbox_relay", "--until-empty", "--relay-id", "r9"],
        env=relay_env({"PUBLISHER": {
            "BACKEND": "eventferry_django.publishers.kombu.KombuPublisher",
            "OPTIONS": {"url": "memory://user:s3cret@localhost/", "exchange": "shop"}}}),
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert " INFO eventferry_django.relay: [r9] starting: database 'default' (" in result.stderr
    assert "KombuPublisher memory://user:****@localhost/ exchange 'shop'" in result.stderr
    assert "s3cret" not in result.stderr
    assert "INFO eventferry_django.relay: [r9] stopped: 0 published, 1 retried" in result.stderr


@pytest.mark.django_db(transaction=True)
def test_the_command_leaves_a_configured_logger_alone() -> None:
    configured = logging.getLogger("eventferry_django")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    configured.addHandler(handler)
    configured.setLevel(logging.WARNING)
    try:
        call_command("outbox_relay", "--until-empty", stdout=io.StringIO())
    finally:
        configured.removeHandler(handler)
        configured.setLevel(logging.NOTSET)
    assert configured.handlers == []
    assert "starting" not in stream.getvalue()
