"""The relay in-process: delivery, retry and dead, outages, waking, stopping."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.test import override_settings

from eventferry_django import NewEvent, publish_event, publish_events
from eventferry_django.conf import get_settings
from eventferry_django.contract import BUCKETS, bucket_of
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.publishers.base import (
    BrokerUnavailable,
    OutboundMessage,
    Outcome,
    Publisher,
    PublishResult,
)
from eventferry_django.publishers.memory import InMemoryPublisher
from eventferry_django.relay import Relay, RelayConfig
from eventferry_django.relay.membership import JOIN_GRACE
from eventferry_django.relay.planner import ClaimPlanner
from eventferry_django.relay.waker import Waker
from eventferry_django.store import dialect_for

from .engine_gaps import babelfish_gap

pytestmark = pytest.mark.django_db(transaction=True)

# MAX_CHAIN 1: these tests pin the heads-only behaviour (test_chains.py has the chains).
FAST_BACKOFF = {"BACKOFF": {"BASE": 0.01, "MAX": 0.02, "JITTER": 0.0}, "MAX_CHAIN": 1,
                "PUBLISHER": {"BACKEND": "eventferry_django.publishers.memory.InMemoryPublisher"}}


class ScriptedPublisher(Publisher):
    """Answers from a script: per topic, an outcome; ``outages`` calls raise first."""

    def __init__(self, outcomes: dict[str, Outcome] | None = None, outages: int = 0) -> None:
        super().__init__()
        self.outcomes = outcomes or {}
        self.outages = outages
        self.calls: list[list[str]] = []
        self.closed = False

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        self.calls.append([m.message_id for m in messages])
        if self.outages:
            self.outages -= 1
            raise BrokerUnavailable("connection refused")
        return [PublishResult(self.outcomes.get(m.topic, Outcome.OK), f"{m.topic} refused")
                for m in messages]

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def _memory() -> Iterator[None]:
    InMemoryPublisher.reset()
    with override_settings(EVENTFERRY=FAST_BACKOFF):
        yield


def relay(publisher: Publisher | None = None, **config: Any) -> Relay:
    settings = get_settings()
    options: dict[str, Any] = {
        "batch_size": 50, "poll_interval": 0.05, "claim_timeout": settings.claim_timeout,
        "max_attempts": settings.max_attempts, "until_empty": True, "error_backoff": 0.01,
    }
    options.update(config)
    return Relay(RelayConfig(**options), publisher=publisher)


def test_delivers_everything_in_order_per_aggregate() -> None:
    with transaction.atomic():
        ids = publish_events([NewEvent("t", {"n": n}, "order", f"o{n % 5}") for n in range(120)])
    stats = relay().run()
    assert stats.published == 120 and stats.dead == stats.retried == 0
    sent = InMemoryPublisher.sent
    assert sorted(m.message_id for m in sent) == sorted(ids)
    for aggregate in {m.aggregate_id for m in sent}:
        ns = [m.payload for m in sent if m.aggregate_id == aggregate]
        assert ns == sorted(ns, key=lambda p: int(p.split(":")[1].rstrip("}")))
    assert set(OutboxEvent.objects.values_list("status", flat=True)) == {Status.DONE}


def test_the_batches_in_flight_each_keep_their_aggregates() -> None:
    with transaction.atomic():
        publish_events([NewEvent("t", {"n": n}, "order", f"o{n % 4}") for n in range(12)])
    aggregate_of = dict(OutboxEvent.objects.values_list("message_id", "aggregate_id"))
    publisher = ScriptedPublisher()
    stats = relay(publisher, batch_size=2, batches_in_flight=2).run()
    assert stats.published == 12
    # Each claim passes over the aggregates of the other batch in flight; a settlement
    # claims in the same transaction, its own batch's aggregates free again.
    assert [{aggregate_of[m] for m in call} for call in publisher.calls] == [
        {"o0", "o1"}, {"o2", "o3"}] * 3


def test_refused_message_is_retried_then_dead_after_max_attempts() -> None:
    with transaction.atomic():
        publish_event("bad", {}, aggregate_type="a", aggregate_id="1")
        publish_event("good", {}, aggregate_type="a", aggregate_id="2")
    publisher = ScriptedPublisher({"bad": Outcome.RETRY})
    stats = relay(publisher, until_empty=False, max_events=6).run()
    # "good" once, "bad" five times: four retries then dead on the fifth.
    assert (stats.published, stats.retried, stats.dead) == (1, 4, 1)
    bad = OutboxEvent.objects.get(topic="bad")
    assert (bad.status, bad.attempts, bad.last_error) == (Status.DEAD, 5, "bad refused")
    assert bad.processed_at is not None


def test_give_up_goes_dead_at_once() -> None:
    with transaction.atomic():
        publish_event("poison", {}, aggregate_type="a", aggregate_id="1")
    stats = relay(ScriptedPublisher({"poison": Outcome.GIVE_UP})).run()
    assert stats.dead == 1
    row = OutboxEvent.objects.get()
    assert (row.status, row.attempts) == (Status.DEAD, 1)


def test_broker_outage_spends_no_attempts_and_delivery_resumes() -> None:
    with transaction.atomic():
        publish_events([NewEvent("t", {}, "a", str(n)) for n in range(3)])
    publisher = ScriptedPublisher(outages=3)
    stats = relay(publisher).run()
    # One batch of 3, refused three times (a back-off each), then delivered.
    assert [len(call) for call in publisher.calls] == [3, 3, 3, 3]
    assert (stats.errors, stats.released, stats.published) == (3, 9, 3)
    assert list(OutboxEvent.objects.values_list("status", "attempts").distinct()) == [
        (Status.DONE, 0)]
    assert publisher.closed


def test_once_raises_on_outage_after_handing_the_batch_back() -> None:
    with transaction.atomic():
        publish_event("t", {}, aggregate_type="a", aggregate_id="1")
    with pytest.raises(BrokerUnavailable):
        relay(ScriptedPublisher(outages=1), until_empty=False, once=True).run()
    row = OutboxEvent.objects.get()
    assert (row.status, row.attempts, row.claimed_at) == (Status.PENDING, 0, None)


def test_unexpected_publisher_errors_are_treated_as_outages() -> None:
    class Broken(Publisher):
        def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
            raise KeyError("bug")

    with transaction.atomic():
        publish_event("t", {}, aggregate_type="a", aggregate_id="1")
    with pytest.raises(BrokerUnavailable, match="publisher raised KeyError"):
        relay(Broken(), until_empty=False, once=True).run()
    assert OutboxEvent.objects.get().status == Status.PENDING


@babelfish_gap("slow-start-up", "the first claim on a new connection compiles for seconds there, past the test's 5 s bound")
def test_until_empty_ignores_rows_waiting_for_retry_or_lease() -> None:
    with transaction.atomic():
        publish_event("later", {}, aggregate_type="a", aggregate_id="1")
    OutboxEvent.objects.update(status=Status.FAILED, attempts=1,
                               next_retry_at="2999-01-01T00:00:00Z")
    started = time.monotonic()
    stats = relay().run()
    assert stats.claimed == 0 and time.monotonic() - started < 5


def test_max_events_caps_the_claims() -> None:
    with transaction.atomic():
        publish_events([NewEvent("t", {}, "a", str(n)) for n in range(30)])
    stats = relay(batch_size=8, until_empty=False, max_events=10).run()
    assert stats.claimed == 10 and OutboxEvent.objects.done().count() == 10


@contextmanager
def running(r: Relay) -> Iterator[Relay]:
    """Run the relay in a thread; stop it and wait for it however the test ends."""

    def target() -> None:
        try:
            r.run()
        finally:
            connections.close_all()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        yield r
    finally:
        r.stop()
        thread.join(10)
    assert not thread.is_alive()


def _wait_for(condition: Any, timeout: float = 10.0) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, "timed out"
        time.sleep(0.01)
    return time.monotonic() - started


def test_commit_in_this_process_wakes_an_idle_relay() -> None:
    with running(relay(until_empty=False, poll_interval=30)) as r:
        time.sleep(0.5)  # let it go idle
        with transaction.atomic():
            publish_event("t", {}, aggregate_type="a", aggregate_id="1")
        _wait_for(lambda: len(InMemoryPublisher.sent) == 1, timeout=5)
        # Woken by the commit (on PostgreSQL its NOTIFY too), not found by a later poll.
        assert r.waker.wakeups >= 1


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_notify_from_another_process_wakes_an_idle_relay() -> None:
    with running(relay(until_empty=False, poll_interval=30)) as r:
        # A NOTIFY wakes a relay holding the row's bucket (a loaded CI machine once took
        # longer than a second to take them); one that holds none yet claims first thing
        # once it does.
        _wait_for(lambda: len(r.holder.held()) == BUCKETS, timeout=30)
        time.sleep(1.0)  # idle by now
        _notify_from_another_connection()
        _wait_for(lambda: len(InMemoryPublisher.sent) == 1, timeout=5)
        assert r.waker.wakeups == 1  # the NOTIFY; no commit happened in this process


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_a_publish_notifies_the_buckets_of_its_rows() -> None:
    """What the relays' wakers read (see relay/waker.py): every bucket of the rows once,
    in one NOTIFY per statement."""
    listener = connections.create_connection("default")
    try:
        listener.ensure_connection()
        raw = listener.connection
        raw.autocommit = True
        raw.execute(f'LISTEN "{get_settings().table_name.notify_channel}"')
        with transaction.atomic():
            publish_events([NewEvent("t", {}, "a", str(n)) for n in (1, 2, 2, 3)])
        payloads = [n.payload for n in raw.notifies(timeout=5, stop_after=1)]
    finally:
        listener.close()
    assert len(payloads) == 1
    assert sorted(map(int, payloads[0].split(","))) == sorted({bucket_of(str(n))
                                                                for n in (1, 2, 3)})


def test_a_notify_wakes_a_relay_only_for_buckets_it_claims_from() -> None:
    waker = Waker("default", "channel", concerns=lambda buckets: 7 in buckets)
    assert waker.wakes_for("7") and waker.wakes_for("3,7,200")
    assert not waker.wakes_for("3") and not waker.wakes_for("3,200")
    # A row without a bucket, or a publisher of 0.1.0: every relay.
    assert waker.wakes_for("")
    assert waker.wakes_for("not buckets")


def _notify_from_another_connection() -> None:
    # Another "process": a separate connection writes the row and queues the NOTIFY,
    # without this process's commit signal.
    other = connections.create_connection("default")
    dialect = dialect_for("postgresql", get_settings().table_name)
    with other.cursor() as cursor:
        cursor.execute("BEGIN")
        cursor.execute(dialect.inserts.insert_sql(1),
                       dialect.inserts.insert_params(
                           ["m-1", "t", "a", "1", None, "{}", "{}", None, bucket_of("1")]))
        cursor.execute("COMMIT")
    other.close()


def test_stop_finishes_the_batch_in_hand() -> None:
    class Slow(Publisher):
        def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
            r.stop()  # a SIGTERM arriving mid-batch
            return [PublishResult.ok() for _ in messages]

    with transaction.atomic():
        publish_events([NewEvent("t", {}, "a", str(n)) for n in range(20)])
    r = relay(Slow(), batch_size=5, batches_in_flight=1, until_empty=False)
    stats = r.run()
    assert stats.published == 5
    assert OutboxEvent.objects.done().count() == 5
    assert OutboxEvent.objects.pending().count() == 15
    assert connection.vendor  # the database is still usable afterwards


def test_a_signal_landing_while_the_relay_holds_its_wakers_lock_still_stops_it(
        caplog: pytest.LogCaptureFixture) -> None:
    """A signal handler runs on the relay's thread between two bytecodes, maybe inside
    its waker's ``Event.clear()``, whose lock is not reentrant: a handler that woke the
    waker waited for that lock forever (a relay of the CI's sqlite leg never stopped)."""
    r = relay(until_empty=False)
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    lock = r.waker._event._cond  # what Event.clear() holds
    r.install_signal_handlers()
    try:
        lock.acquire()
        rescue = threading.Timer(10, lock.release)  # frees a handler stuck on it
        rescue.start()
        started = time.monotonic()
        signal.raise_signal(signal.SIGTERM)  # handled here, on this thread, lock held
        waited = time.monotonic() - started
        rescue.cancel()
        rescue.join()
        if waited < 10:
            lock.release()
        assert waited < 10, "the handler waited for the waker's lock"
        with caplog.at_level("INFO", logger="eventferry_django.relay"):
            stats = r.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    assert stats.passes == 0
    assert "SIGTERM: finishing the batches in flight, then stopping" in caplog.text


def test_the_planner_asks_for_no_more_than_max_events_leaves() -> None:
    planner = ClaimPlanner(batch_size=100, max_chain=10, max_events=250)
    request = planner.next_claim((1, 2), claimed=200, in_flight=20)
    assert request is not None
    assert (request.rows, request.most_heads, request.max_chain, request.buckets) == (
        30, 30, 10, (1, 2))
    assert planner.next_claim(None, claimed=230, in_flight=20) is None


def test_a_relay_holding_no_bucket_asks_for_nothing() -> None:
    planner = ClaimPlanner(batch_size=100, max_chain=10)
    assert planner.next_claim(()) is None
    request = planner.next_claim(None)  # every bucket held: oldest first
    assert request is not None and request.buckets is None


@pytest.mark.serial("interrupts the relay half a second after its first claim, when its first batch must be out")
@babelfish_gap("slow-start-up", "the first claim on the connection takes seconds there, so the interrupt lands inside it, before any batch is out")
def test_interrupted_it_hands_back_what_is_in_flight_and_sends_nothing_more() -> None:
    release = threading.Event()

    class Stuck(ScriptedPublisher):
        def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
            self.calls.append([m.message_id for m in messages])
            release.wait(10)  # a broker that does not answer
            return [PublishResult.ok() for _ in messages]

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    with transaction.atomic():
        publish_events([NewEvent("t", {}, "a", str(n)) for n in range(4)])
    publisher = Stuck()
    previous = signal.signal(signal.SIGALRM, interrupt)
    # A second SIGTERM, as far as run() knows, once the relay has looked for others to
    # share with (membership.JOIN_GRACE) and sent its first batch.
    signal.setitimer(signal.ITIMER_REAL, JOIN_GRACE + 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            relay(publisher, until_empty=False, batch_size=2).run()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        release.set()
    time.sleep(0.3)  # time enough for a batch wrongly left queued to go out
    # The first batch was out; the second, still queued, was never sent; both came back.
    assert [len(call) for call in publisher.calls] == [2]
    assert list(OutboxEvent.objects.values_list("status", "attempts").distinct()) == [
        (Status.PENDING, 0)]
    assert not publisher.closed  # the publishing thread still had it
