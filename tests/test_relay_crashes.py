"""Relays as real processes, killed with SIGKILL: nothing is lost, poison ends dead, and
a relay that lost its lease cannot settle rows another relay now holds."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction

from eventferry_django import NewEvent, publish_events
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.store.outbox import OutboxStore

from .engine_gaps import babelfish_gap
from .relay_process import freeze_between_transactions, start_relay, wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

FILE_PUBLISHER = "tests.process_publishers.FilePublisher"


def settings_for(path: Path, *, claim_timeout: float = 60, max_attempts: int = 5,
                 **options: Any) -> dict[str, Any]:
    return {
        "CLAIM_TIMEOUT": claim_timeout,
        "MAX_ATTEMPTS": max_attempts,
        "PUBLISHER": {"BACKEND": FILE_PUBLISHER, "OPTIONS": {"path": str(path), **options}},
    }


def published(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_killed_relays_rows_come_back_after_the_lease(tmp_path: Path) -> None:
    out = tmp_path / "published.jsonl"
    with transaction.atomic():
        publish_events([NewEvent("stall" if n == 0 else "t", {"n": n}, "a", str(n))
                        for n in range(10)])
    # One batch in flight: the stall holds up the whole claim, not half of it.
    victim = start_relay(settings_for(out, claim_timeout=1.5, stall_topic="stall"),
                         "--batch-size", "10", "--batches-in-flight", "1",
                         log=tmp_path / "victim.log")
    wait_until(lambda: len(published(out)) == 10, what="the victim to publish its batch")
    assert OutboxEvent.objects.in_flight().count() == 10  # published but never acked
    victim.send_signal(signal.SIGKILL)
    victim.wait(10)
    # --until-empty does not wait for leases: start once the victim's has run out.
    time.sleep(1.6)

    survivor = start_relay(settings_for(out, claim_timeout=1.5), "--until-empty",
                           log=tmp_path / "survivor.log")
    assert survivor.wait(60) == 0, (tmp_path / "survivor.log").read_text()
    # The lease expired, the rows were taken back (one attempt each) and published again.
    rows = list(OutboxEvent.objects.values_list("status", "attempts"))
    assert rows == [(Status.DONE, 1)] * 10
    by_pid: dict[int, set[int]] = {}
    for line in published(out):
        by_pid.setdefault(line["pid"], set()).add(line["id"])
    assert sorted(len(ids) for ids in by_pid.values()) == [10, 10]


def test_an_event_that_kills_every_relay_ends_dead(tmp_path: Path) -> None:
    out = tmp_path / "published.jsonl"
    with transaction.atomic():
        publish_events([NewEvent("killer", {}, "a", "1"), NewEvent("t", {}, "b", "1")])
    settings = settings_for(out, claim_timeout=0.5, max_attempts=3, kill_topic="killer")
    exits = []
    for attempt in range(6):
        relay = start_relay(settings, "--until-empty", "--batch-size", "1",
                            log=tmp_path / f"relay{attempt}.log")
        exits.append(relay.wait(60))
        if exits[-1] == 0:
            break
        time.sleep(0.6)  # let the lease expire
    # Three relays died on it; the fourth buried it unpublished and moved on.
    assert exits == [-signal.SIGKILL] * 3 + [0]
    killer = OutboxEvent.objects.get(topic="killer")
    assert (killer.status, killer.attempts) == (Status.DEAD, 3)
    assert "taken over" in (killer.last_error or "")
    assert OutboxEvent.objects.get(topic="t").status == Status.DONE
    assert [p["aggregate_id"] for p in published(out)] == ["1"]


@babelfish_gap("slow-start-up", "a relay process's first claim compiles for seconds there, so the fast relay misses its window to take the row back")
def test_a_stale_relays_late_ack_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "published.jsonl"
    with transaction.atomic():
        publish_events([NewEvent("t", {}, "a", "1")])
    # A live relay renews its lease however slow it is, so this one is frozen (SIGSTOP)
    # while it publishes: it renews nothing, and its 1 s lease runs out for real. Its
    # publish returns only once the test releases it: with a fixed delay, a loaded machine
    # once froze it after the delay, inside its settle, holding the row the other waited on.
    release = tmp_path / "release"
    slow = start_relay(settings_for(out, claim_timeout=1, hold_until=str(release)), "--once",
                       log=tmp_path / "slow.log")
    wait_until(lambda: len(published(out)) == 1, what="the slow relay to publish")
    freeze_between_transactions(slow, bucket_table(), journal_table(),
                                connection.ops.quote_name(OutboxEvent._meta.db_table))
    try:
        time.sleep(1.5)
        fast = start_relay(settings_for(out, claim_timeout=1), "--until-empty",
                           log=tmp_path / "fast.log")
        assert fast.wait(30) == 0, (tmp_path / "fast.log").read_text()
        row = OutboxEvent.objects.get()
        assert (row.status, row.attempts) == (Status.DONE, 1)
        done_at = row.processed_at
    finally:
        release.touch()
        slow.send_signal(signal.SIGCONT)
    assert slow.wait(30) == 0
    log = (tmp_path / "slow.log").read_text()
    assert "taken over by another relay" in log
    row.refresh_from_db()
    assert row.processed_at == done_at  # the late ack changed nothing
    assert len(published(out)) == 2  # at-least-once: both relays published it


def _kill_other_connections() -> int:
    """Terminate every other session on the test database, the relay's among them."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return len(cursor.fetchall())
        cursor.execute(
            "SELECT id FROM information_schema.processlist "
            "WHERE db = DATABASE() AND id <> CONNECTION_ID()"
        )
        ids = [row[0] for row in cursor.fetchall()]
        for session in ids:
            cursor.execute(f"KILL {int(session)}")
        return len(ids)


@pytest.mark.skipif("connection.vendor not in {'postgresql', 'mysql'}")
def test_relay_recovers_when_its_database_connection_is_killed(tmp_path: Path) -> None:
    out = tmp_path / "published.jsonl"
    log = tmp_path / "relay.log"
    relay = start_relay(settings_for(out), "--poll-interval", "0.2", log=log)
    try:
        with transaction.atomic():
            publish_events([NewEvent("t", {"n": n}, "a", str(n)) for n in range(5)])
        wait_until(lambda: OutboxEvent.objects.done().count() == 5, what="first delivery")
        assert _kill_other_connections() >= 1
        with transaction.atomic():
            publish_events([NewEvent("t", {"n": n}, "b", str(n)) for n in range(5)])
        wait_until(lambda: OutboxEvent.objects.done().count() == 10, what="delivery after kill")
        assert relay.poll() is None, log.read_text()  # still running
    finally:
        relay.send_signal(signal.SIGTERM)
        relay.wait(30)
    assert relay.returncode == 0, log.read_text()
    assert "database unavailable" in log.read_text()


def _backends_waiting_in_a_claim() -> list[int]:
    """The sessions on the test database whose claim waits for a table lock to record
    its batch in the journal of batches in flight."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' "
            "AND query LIKE %s",
            [f"INSERT INTO {journal_table()}%"],
        )
        return [row[0] for row in cursor.fetchall()]


def journal_table() -> str:
    return OutboxStore().dialect.name.in_flight.quoted(connection.vendor)


def bucket_table() -> str:
    return OutboxStore().dialect.name.bucket_leases.quoted(connection.vendor)


def _backend_alive(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone() is not None


@pytest.mark.skipif("connection.vendor != 'postgresql'",
                    reason="client_connection_check_interval is PostgreSQL's (14+); other "
                    "servers are not known to keep a dead client's statement running")
def test_a_killed_relays_claim_does_not_keep_running_on_the_server(tmp_path: Path) -> None:
    # PostgreSQL notices a vanished client only when it next writes to it, so a claim
    # that is still running when its relay dies holds its locks and burns CPU until it
    # ends. Here the claim waits for a lock the test holds, which without a connection
    # check it would do for as long as the test cared to hold it.
    log = tmp_path / "relay.log"
    with transaction.atomic():
        publish_events([NewEvent("t", {}, "a", "1")])  # a claim that finds a batch
    locker = connection.get_new_connection(connection.get_connection_params())
    relay = None
    try:
        # SHARE conflicts with the claim's INSERT of its batch into the journal and lets
        # the relay's reads through.
        locker.execute(f"LOCK TABLE {journal_table()} IN SHARE MODE")
        relay = start_relay(settings_for(tmp_path / "published.jsonl"),
                            "--poll-interval", "0.2", log=log)
        wait_until(_backends_waiting_in_a_claim, timeout=60,
                   what="the relay's claim to wait for the table lock")
        [backend] = _backends_waiting_in_a_claim()
        relay.send_signal(signal.SIGKILL)
        relay.wait(10)
        # The relay checks its connection every second (plus a loaded machine's delay).
        wait_until(lambda: not _backend_alive(backend), timeout=10,
                   what=f"the dead relay's backend {backend} to end its claim")
    finally:
        if relay is not None and relay.poll() is None:
            relay.kill()
            relay.wait(10)
        locker.close()


def test_a_second_sigterm_exits_at_once_and_hands_back_what_is_in_flight(
    tmp_path: Path,
) -> None:
    out = tmp_path / "published.jsonl"
    log = tmp_path / "relay.log"
    with transaction.atomic():
        publish_events([NewEvent("stall" if n == 0 else "t", {"n": n}, "a", str(n))
                        for n in range(4)])
    # Two batches of 2 go out; the publisher hangs on the first.
    relay = start_relay(settings_for(out, stall_topic="stall"), "--batch-size", "2",
                        log=log)
    try:
        wait_until(lambda: len(published(out)) == 2, what="the first batch to go out")
        relay.send_signal(signal.SIGTERM)  # finish the batch in hand: it never finishes
        time.sleep(0.5)
        assert relay.poll() is None, log.read_text()
        relay.send_signal(signal.SIGTERM)
        assert relay.wait(10) == 128 + signal.SIGTERM, log.read_text()
    finally:
        if relay.poll() is None:
            relay.kill()
    # Both batches were handed back at once, unspent, rather than left to their lease.
    assert list(OutboxEvent.objects.values_list("status", "attempts", "claimed_at")) == [
        (Status.PENDING, 0, None)] * 4


@pytest.mark.skipif("connection.vendor not in {'postgresql', 'mysql'}",
                    reason="SQLite's relays do not share; the T-SQL endpoint is too slow for "
                    "200,000 events in a test")
@pytest.mark.serial("four relay processes and two kills, timed against a 3 s lease")
def test_two_of_four_relays_killed_mid_drain_lose_nothing_bury_nothing_keep_order(
    tmp_path: Path,
) -> None:
    events, aggregates = 200_000, 1000
    for start in range(0, events, 20_000):
        with transaction.atomic():
            publish_events([NewEvent("t", {"n": n}, "order", f"o{n % aggregates}")
                            for n in range(start, start + 20_000)])
    outs = [tmp_path / f"published{n}.jsonl" for n in range(4)]
    logs = [tmp_path / f"relay{n}.log" for n in range(4)]
    # A file each: four processes appending to one file could interleave their lines.
    relays = [start_relay(settings_for(out, claim_timeout=3), "--poll-interval", "0.1",
                          log=log) for out, log in zip(outs, logs, strict=True)]
    try:
        wait_until(lambda: OutboxEvent.objects.done().count() >= events // 4, timeout=120,
                   what="a quarter of the events to be delivered")
        for victim in relays[:2]:
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
        wait_until(lambda: not OutboxEvent.objects.open().exists(), timeout=180,
                   what="the survivors to deliver the rest")
    finally:
        for relay in relays[2:]:
            relay.send_signal(signal.SIGTERM)
        for relay in relays:
            if relay.poll() is None:
                relay.wait(30)
    assert [relay.returncode for relay in relays[2:]] == [0, 0], [
        log.read_text()[-2000:] for log in logs[2:]]
    # Nothing lost, nothing dead: every row done, an attempt counted only for the rows the
    # survivors took over from the killed relays' batches in flight.
    assert set(OutboxEvent.objects.values_list("status", flat=True)) == {Status.DONE}
    assert set(OutboxEvent.objects.values_list("attempts", flat=True)) <= {0, 1}
    lines = sorted((line for out in outs for line in published(out)), key=lambda line: line["at"])
    assert {line["id"] for line in lines} == set(OutboxEvent.objects.values_list("id", flat=True))
    # Order per aggregate: the first delivery of each event comes in id order.
    first: dict[str, list[int]] = {}
    seen: set[int] = set()
    for line in lines:
        if line["id"] not in seen:
            seen.add(line["id"])
            first.setdefault(line["aggregate_id"], []).append(line["id"])
    broken = [a for a, ids in first.items() if ids != sorted(ids)]
    assert not broken, broken[:5]
