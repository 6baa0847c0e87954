"""Scheduled delivery (``deliver_at``, ``delay``) against a real database and a real
relay, and the age of the oldest claimable row that the status and the gauge report."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connections, transaction
from django.test import override_settings

from eventferry_django import NewEvent, publish_event, publish_events
from eventferry_django.conf import get_settings
from eventferry_django.exceptions import InvalidEvent
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.publishers.base import OutboundMessage, Publisher, PublishResult
from eventferry_django.relay import Relay, RelayConfig
from eventferry_django.status import outbox_status
from eventferry_django.store.outbox import OutboxStore, Settlement

from .engine_gaps import babelfish_gap

pytestmark = pytest.mark.django_db(transaction=True)

SETTINGS = {"MAX_CHAIN": 10, "BACKOFF": {"BASE": 0.01, "MAX": 0.02, "JITTER": 0.0},
            "PUBLISHER": {"BACKEND": "eventferry_django.publishers.memory.InMemoryPublisher"}}
SECOND = dt.timedelta(seconds=1)
HOUR = dt.timedelta(hours=1)


@pytest.fixture(autouse=True)
def _settings() -> Iterator[None]:
    with override_settings(EVENTFERRY=SETTINGS):
        yield


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def publish(topic: str, aggregate_id: str = "o1", **options: Any) -> str:
    with transaction.atomic():
        return publish_event(topic, {"topic": topic}, aggregate_type="order",
                             aggregate_id=aggregate_id, **options)


def row(message_id: str) -> OutboxEvent:
    return OutboxEvent.objects.get(message_id=message_id)


# -- what is written ---------------------------------------------------------------------
def test_delay_is_added_to_the_database_clock_and_deliver_at_is_stored_as_given() -> None:
    delayed = publish("t", delay=dt.timedelta(days=3, milliseconds=1))
    at = now().replace(microsecond=250_000) + dt.timedelta(days=40)
    exact = publish("t", aggregate_id="o2", deliver_at=at.astimezone(dt.timezone(-5 * HOUR)))
    immediate = publish("t", aggregate_id="o3")

    waited = row(delayed).next_retry_at - row(delayed).created_at  # both the database's clock
    assert dt.timedelta(days=3) < waited < dt.timedelta(days=3) + SECOND
    # 40 days: past the millisecond DATEADD's ~24.8 day range on SQL Server.
    assert row(exact).next_retry_at == at
    assert row(immediate).next_retry_at is None
    assert {r.status for r in OutboxEvent.objects.all()} == {Status.PENDING}
    assert {r.attempts for r in OutboxEvent.objects.all()} == {0}


def test_deliver_at_is_rounded_up_to_the_millisecond_never_down() -> None:
    at = now().replace(microsecond=123_456) + HOUR
    assert row(publish("t", deliver_at=at)).next_retry_at == at.replace(microsecond=124_000)


def test_a_delay_of_zero_or_less_means_now() -> None:
    for delay in (dt.timedelta(0), -HOUR):
        assert row(publish("t", aggregate_id=str(delay), delay=delay)).next_retry_at is None


def test_publish_events_mixes_scheduled_and_immediate_events_in_id_order() -> None:
    with transaction.atomic():
        ids = publish_events([
            NewEvent("t", {}, "order", "o1"),
            NewEvent("t", {}, "order", "o2", delay=HOUR),
            {"topic": "t", "payload": {}, "aggregate_type": "order", "aggregate_id": "o3",
             "deliver_at": now() + 2 * HOUR},
            NewEvent("t", {}, "order", "o4", message_id="chosen-4"),
        ])
    rows = list(OutboxEvent.objects.order_by("id"))
    assert [r.message_id for r in rows] == ids
    assert [r.next_retry_at is not None for r in rows] == [False, True, True, False]


@pytest.mark.parametrize(("options", "message"), [
    ({"delay": HOUR, "deliver_at": now() + HOUR}, "give one of them, not both"),
    ({"deliver_at": dt.datetime(2030, 1, 1, 9)}, "is naive; give a timezone-aware datetime"),
    ({"deliver_at": "2030-01-01T09:00:00Z"}, "deliver_at: must be a timezone-aware datetime"),
    ({"delay": 60}, "delay: must be a datetime.timedelta"),
    ({"delay": dt.timedelta(days=40_000)}, "delay: 40000 days, 0:00:00 is more than 36,525"),
    ({"deliver_at": dt.datetime.max.replace(tzinfo=dt.UTC)}, "is more than 36,525 days ahead"),
])
def test_bad_schedules_are_refused_naming_the_field_and_nothing_is_written(
    options: dict[str, Any], message: str,
) -> None:
    with pytest.raises(InvalidEvent, match=message):
        publish("t", **options)
    second = NewEvent("t", {}, "order", "o2", **options)
    with (pytest.raises(InvalidEvent, match=r"^events\[1\]\.(deliver_at|delay)\b"),
          transaction.atomic()):
        publish_events([NewEvent("t", {}, "order", "o1"), second])
    assert not OutboxEvent.objects.exists()


# -- what a relay does with them ----------------------------------------------------------
class Arrivals(Publisher):
    """Notes when each message reached the "broker"."""

    def __init__(self) -> None:
        super().__init__()
        self.at: dict[str, float] = {}
        self.order: list[str] = []

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        for message in messages:
            self.at[message.message_id] = time.time()
            self.order.append(message.message_id)
        return [PublishResult.ok() for _ in messages]


def relay(publisher: Publisher) -> Relay:
    settings = get_settings()
    return Relay(RelayConfig(
        batch_size=50, poll_interval=0.05, claim_timeout=settings.claim_timeout,
        max_attempts=settings.max_attempts, error_backoff=0.01,
    ), publisher=publisher)


@contextmanager
def running(arrivals: Arrivals) -> Iterator[Callable[[int], None]]:
    """A relay in a thread, past its first pass before the test publishes (a new
    connection's first claim can take seconds on some engines), stopped however the
    test ends; yields a function that waits until ``count`` messages arrived."""
    r = relay(arrivals)

    def target() -> None:
        try:
            r.run()
        finally:
            connections.close_all()

    def wait_for(count: int, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while len(arrivals.at) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(arrivals.at) == count, f"{len(arrivals.at)} of {count} arrived"

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while r.stats.passes < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        yield wait_for
    finally:
        r.stop()
        thread.join(10)
    assert not thread.is_alive()


DELAY = 2.0


SLOW_START = "statements new to a connection compile for seconds there, past these bounds"


def test_the_claim_takes_a_scheduled_event_once_the_database_clock_passes_its_time() -> None:
    scheduled = publish("t", aggregate_id="o1", delay=HOUR)
    behind = publish("t", aggregate_id="o1")
    immediate = publish("t", aggregate_id="o2")
    store = OutboxStore(max_chain=10)

    def claim() -> list[str]:
        claimed = store.claim(10)
        if claimed:
            store.settle(Settlement(claimed[0].batch, delivered=claimed))
        return [event.message.message_id for event in claimed]

    assert claim() == [immediate]
    assert claim() == []
    OutboxEvent.objects.filter(message_id=scheduled).update(next_retry_at=now() - SECOND)
    assert claim() == [scheduled, behind]


@pytest.mark.serial("times arrivals to within a second of their commit or due time")
@babelfish_gap("slow-start-up", SLOW_START)
def test_a_scheduled_event_arrives_no_earlier_than_its_time_and_promptly_after() -> None:
    arrivals = Arrivals()
    with running(arrivals) as wait_for:
        before = time.time()
        with transaction.atomic():
            later = publish_event("later", {}, aggregate_type="order", aggregate_id="o1",
                                  delay=dt.timedelta(seconds=DELAY))
            at = publish_event("at", {}, aggregate_type="order", aggregate_id="o2",
                               deliver_at=now() + dt.timedelta(seconds=DELAY))
            soon = publish_event("now", {}, aggregate_type="order", aggregate_id="o3")
        committed = time.time()
        wait_for(3)
    assert arrivals.at[soon] - committed < 1.0
    for scheduled in (later, at):
        assert arrivals.at[scheduled] >= before + DELAY
        # Found by the relay's next poll once due, not by the hold-up of anything else.
        assert arrivals.at[scheduled] - (committed + DELAY) < 1.5
    assert OutboxEvent.objects.filter(status=Status.DONE).count() == 3


@babelfish_gap("slow-start-up", SLOW_START)
def test_a_scheduled_event_holds_back_the_later_events_of_its_aggregate() -> None:
    """Strict order: the aggregate's next event waits for the scheduled one."""
    arrivals = Arrivals()
    with running(arrivals) as wait_for:
        with transaction.atomic():
            scheduled = publish_event("reminder", {}, aggregate_type="order",
                                      aggregate_id="o1", delay=dt.timedelta(seconds=DELAY))
            behind = publish_event("shipped", {}, aggregate_type="order", aggregate_id="o1")
        wait_for(2)
    assert arrivals.order == [scheduled, behind]
    assert arrivals.at[behind] >= arrivals.at[scheduled]


@pytest.mark.serial("the event behind it must arrive within a second of its commit")
@babelfish_gap("slow-start-up", SLOW_START)
def test_under_an_aggregate_key_of_its_own_a_scheduled_event_holds_nothing_back() -> None:
    """The opt-out: the scheduled event is its own aggregate; the partition key keeps it
    on the order's broker partition."""
    arrivals = Arrivals()
    with running(arrivals) as wait_for:
        committed = time.time()
        with transaction.atomic():
            scheduled = publish_event("reminder", {}, aggregate_type="order",
                                      aggregate_id="o1:reminder", partition_key="o1",
                                      delay=dt.timedelta(seconds=DELAY))
            after = publish_event("shipped", {}, aggregate_type="order", aggregate_id="o1")
        wait_for(2)
    assert arrivals.order == [after, scheduled]
    assert arrivals.at[after] - committed < 1.0 <= arrivals.at[scheduled] - committed


# -- status and gauge ---------------------------------------------------------------------
def test_status_counts_scheduled_rows_apart_from_pending_ones() -> None:
    publish("a", aggregate_id="o1")
    publish("a", aggregate_id="o2", delay=HOUR)
    publish("b", aggregate_id="o3", deliver_at=now() + HOUR)
    due = publish("b", aggregate_id="o4", deliver_at=now() + HOUR)
    OutboxEvent.objects.filter(message_id=due).update(next_retry_at=now() - SECOND)
    status = outbox_status(by_topic=True)
    assert dict(status.backlog) == {"pending": 2, "scheduled": 2, "claimed": 0, "failed": 0}
    assert status.by_topic == {
        "a": {"pending": 1, "scheduled": 1, "claimed": 0, "failed": 0, "dead": 0},
        "b": {"pending": 1, "scheduled": 1, "claimed": 0, "failed": 0, "dead": 0},
    }
    assert status.as_dict()["backlog"]["scheduled"] == 2


def age() -> float:
    return outbox_status().oldest_claimable_age_seconds


def test_the_oldest_claimable_age_leaves_out_what_cannot_be_claimed_now() -> None:
    long_ago = now() - dt.timedelta(days=2)
    # Scheduled ahead, and the event of its aggregate behind it: nothing claimable.
    publish("t", aggregate_id="o1", delay=HOUR)
    publish("t", aggregate_id="o1")
    # A retry backing off, and the event behind it.
    backing_off = publish("t", aggregate_id="o2")
    publish("t", aggregate_id="o2")
    OutboxEvent.objects.filter(message_id=backing_off).update(
        status=Status.FAILED, attempts=1, next_retry_at=now() + HOUR)
    OutboxEvent.objects.update(created_at=long_ago)
    assert age() == 0.0
    assert outbox_status().oldest_claimable_since is None

    # Scheduled two days ago for ten minutes ago: waiting since its time, not its birth.
    due = publish("t", aggregate_id="o3", deliver_at=now() + HOUR)
    OutboxEvent.objects.filter(message_id=due).update(
        created_at=long_ago, next_retry_at=now() - dt.timedelta(minutes=10))
    assert age() == pytest.approx(600, abs=30)

    # A retry whose time came twenty minutes ago.
    retry = publish("t", aggregate_id="o4")
    OutboxEvent.objects.filter(message_id=retry).update(
        status=Status.FAILED, attempts=1, created_at=long_ago,
        next_retry_at=now() - dt.timedelta(minutes=20))
    assert age() == pytest.approx(1200, abs=30)

    # A fresh row written an hour ago.
    fresh = publish("t", aggregate_id="o6")
    OutboxEvent.objects.filter(message_id=fresh).update(created_at=now() - HOUR)
    assert age() == pytest.approx(3600, abs=30)
    assert outbox_status().as_dict()["oldest_claimable_age_seconds"] == pytest.approx(
        3600, abs=30)
