"""Slowness is not a crash: a live relay renews the leases of the rows it holds, so only
a relay that stopped loses them (and only then is an attempt spent on them).

The relay tests run relays as real processes with ``MAX_ATTEMPTS`` 1: any lease taken
back from a live relay would cost an attempt and bury its event, so "nothing dead" is a
sharp test of the promise.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from eventferry_django import NewEvent, publish_events
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.relay.leases import RENEWALS_PER_LEASE, LeaseKeeper
from eventferry_django.store.outbox import OutboxStore

from .engine_gaps import babelfish_gap
from .relay_process import start_relay, wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    # Real leases of a second or two: on a loaded machine they run out under a test that
    # expects them renewed, or are renewed late.
    pytest.mark.serial("its leases last a second or two and run out on a loaded machine"),
]

FILE_PUBLISHER = "tests.process_publishers.FilePublisher"

#: Locks one row from another connection, as a DBA's or an admin's transaction would.
LOCK_ROW = {
    "postgresql": "SELECT status FROM {table} WHERE id = %s FOR UPDATE",
    "mysql": "SELECT status FROM {table} WHERE id = %s FOR UPDATE",
    "microsoft": "SELECT status FROM {table} WITH (UPDLOCK, ROWLOCK) WHERE id = %s",
}


def publish(count: int, aggregates: int = 1) -> None:
    with transaction.atomic():
        publish_events([NewEvent("t", {"n": n}, "agg", str(n % aggregates))
                        for n in range(count)])


def outcomes() -> dict[tuple[int, int], int]:
    """(status, attempts) -> rows."""
    counts: dict[tuple[int, int], int] = {}
    for row in OutboxEvent.objects.values_list("status", "attempts"):
        counts[row] = counts.get(row, 0) + 1
    return counts


@pytest.fixture
def row_locker(second_connection: BaseDatabaseWrapper) -> Iterator[Any]:
    """``lock(row_id)`` locks a row from another connection in a transaction that stays
    open until the test ends or calls ``unlock()``; returns the row's status."""
    if connection.vendor not in LOCK_ROW:
        pytest.skip("SQLite has one writer at a time: it has no row locks to hold")
    table = OutboxStore().dialect.table
    second_connection.set_autocommit(False)

    class Locker:
        def lock(self, row_id: int) -> int:
            with second_connection.cursor() as cursor:
                cursor.execute(LOCK_ROW[connection.vendor].format(table=table), [row_id])
                [(status,)] = cursor.fetchall()
            return int(status)

        def unlock(self) -> None:
            second_connection.rollback()

    try:
        yield Locker()
    finally:
        second_connection.rollback()
        second_connection.set_autocommit(True)


# -- the store ---------------------------------------------------------------------------
def test_a_renewed_lease_is_not_taken_back_and_its_token_still_settles() -> None:
    publish(2, aggregates=2)
    store = OutboxStore()
    held = store.claim(10, lease_timeout=0.3)
    assert store.renew(held, lease_timeout=2) == 2
    time.sleep(0.5)  # past the claim's own lease, within the renewal
    assert store.claim(10, lease_timeout=0.3) == []
    # Renewing moved the expiry, not the lease token: the holder settles as before.
    assert store.ack(held) == 2
    assert outcomes() == {(Status.DONE, 0): 2}


def test_a_lease_no_longer_renewed_runs_out_costs_an_attempt_and_fences_its_holder() -> None:
    publish(1)
    store = OutboxStore()
    stale = store.claim(1, lease_timeout=0.2)
    assert store.renew(stale, lease_timeout=0.5) == 1
    time.sleep(0.7)
    [fresh] = store.claim(1, lease_timeout=0.2)
    assert fresh.message.attempts == 1
    # The relay that stopped renewing can neither renew nor settle what it lost.
    assert store.renew(stale, lease_timeout=60) == 0
    assert store.ack(stale) == 0
    assert store.ack([fresh]) == 1


def test_renewing_settled_or_released_rows_changes_nothing() -> None:
    publish(2, aggregates=2)
    store = OutboxStore()
    first, second = store.claim(10, lease_timeout=60)
    store.ack([first])
    store.release([second])
    assert store.renew([first, second], lease_timeout=60) == 0
    assert sorted(OutboxEvent.objects.values_list("status", flat=True)) == [
        Status.PENDING, Status.DONE]
    # A released row is pending with no retry time: claimable at once.
    assert [e.id for e in store.claim(10, lease_timeout=60)] == [second.id]


@babelfish_gap("locking-hints-ignored", "the competitor's UPDLOCK takes no lock there, so there is no locked row for READPAST to skip")
def test_a_renewal_skips_a_locked_row_instead_of_waiting_for_it(row_locker: Any) -> None:
    publish(3, aggregates=3)
    store = OutboxStore()
    held = store.claim(10, lease_timeout=60)
    assert row_locker.lock(held[1].id) == Status.CLAIMED
    started = time.monotonic()
    assert store.renew(held, lease_timeout=60) == 2
    assert time.monotonic() - started < 5  # it did not sit out a lock wait


# -- the keeper --------------------------------------------------------------------------
def test_the_keeper_renews_what_it_holds_until_it_lets_go() -> None:
    publish(2, aggregates=2)
    store = OutboxStore()
    lease = 0.6
    first, second = store.claim(10, lease_timeout=lease)
    keeper = LeaseKeeper(store, lease, name="test-keeper")
    assert keeper.interval == pytest.approx(lease / RENEWALS_PER_LEASE)
    keeper.hold([first, second])
    keeper.start()
    try:
        time.sleep(lease * 3)
        assert store.claim(10, lease_timeout=lease) == []  # both renewed all along
        keeper.let_go([second])
        time.sleep(lease * 2)
        [taken] = store.claim(10, lease_timeout=lease)
        assert taken.id == second.id and taken.message.attempts == 1
        assert keeper.held == 1 and keeper.renewed >= 4
    finally:
        keeper.stop(5)
    assert store.ack([first]) == 1


# -- relays as processes -----------------------------------------------------------------
def relay_settings(path: Path, *, claim_timeout: float, delay: float) -> dict[str, Any]:
    return {
        "CLAIM_TIMEOUT": claim_timeout,
        "MAX_ATTEMPTS": 1,
        "PUBLISHER": {"BACKEND": FILE_PUBLISHER, "OPTIONS": {"path": str(path), "delay": delay}},
    }


def stop_all(relays: list[Any], logs: list[Path]) -> None:
    for relay in relays:
        relay.send_signal(signal.SIGTERM)
    for relay, log in zip(relays, logs, strict=True):
        assert relay.wait(60) == 0, log.read_text()


def settled() -> bool:
    return not OutboxEvent.objects.exclude(status__in=[Status.DONE, Status.DEAD]).exists()


@pytest.mark.slow
@babelfish_gap("slow-start-up", "a relay process's first claim compiles for seconds there, past the test's waits")
def test_a_publisher_slower_than_the_lease_turns_nothing_dead(tmp_path: Path) -> None:
    # Every publisher call takes 1.5 lease timeouts. Before leases were renewed, another
    # relay took each batch back and buried it; so did the same relay, whose second batch
    # in flight waited out its lease behind the first. SQLite runs one relay.
    publish(60, aggregates=20)
    out = tmp_path / "published.jsonl"
    # Two-second leases: with one-second leases a loaded CI run on MariaDB once saw one
    # row taken back (not reproduced in four runs alone); the ratio is what matters.
    settings = relay_settings(out, claim_timeout=2.0, delay=3.0)
    relays = 1 if connection.vendor == "sqlite" else 2
    logs = [tmp_path / f"relay{n}.log" for n in range(relays)]
    relays = [start_relay(settings, "--batch-size", "10", "--poll-interval", "0.2",
                          log=log) for log in logs]
    try:
        wait_until(settled, timeout=120, what="the outbox to settle")
    finally:
        stop_all(relays, logs)
    assert outcomes() == {(Status.DONE, 0): 60}
    published = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(p["id"] for p in published) == sorted(
        OutboxEvent.objects.values_list("id", flat=True))  # each once: none taken back


@pytest.mark.slow
@babelfish_gap("locking-hints-ignored", "the test's UPDLOCK takes no lock there, so the relay's ack is never held up")
def test_a_settlement_held_up_by_a_row_lock_beyond_the_lease_turns_nothing_dead(
    tmp_path: Path, row_locker: Any,
) -> None:
    publish(40, aggregates=40)
    out = tmp_path / "published.jsonl"
    # Two-second leases, as above: with one-second leases a loaded CI run on PostgreSQL
    # once saw a renewal come too late and one row taken back.
    lease = 2.0
    settings = relay_settings(out, claim_timeout=lease, delay=1.0)
    logs = [tmp_path / "held.log", tmp_path / "competitor.log"]
    held = start_relay(settings, "--batch-size", "10", "--poll-interval", "0.2", log=logs[0])
    relays = [held]
    try:
        # Lock a row the relay has claimed: its ack (and the claim sharing its
        # transaction) waits for it, three leases long, while a competitor claims.
        wait_until(lambda: OutboxEvent.objects.claimed().exists(), timeout=60,
                   what="the relay to claim")
        row = OutboxEvent.objects.claimed().order_by("id").first()
        assert row is not None
        if row_locker.lock(row.id) != Status.CLAIMED:
            pytest.skip("the relay settled the row before the test could lock it")
        relays.append(start_relay(settings, "--batch-size", "10", "--poll-interval", "0.2",
                                  log=logs[1]))
        # The competitor claims while the held relay's leases would have run out.
        wait_until(lambda: logs[1].exists() and "starting:" in logs[1].read_text(),
                   timeout=60, what="the competitor to start")
        time.sleep(lease * 3)
        assert OutboxEvent.objects.get(id=row.id).status == Status.CLAIMED
        row_locker.unlock()
        wait_until(settled, timeout=120, what="the outbox to settle")
    finally:
        row_locker.unlock()
        stop_all(relays, logs)
    assert outcomes() == {(Status.DONE, 0): 40}
