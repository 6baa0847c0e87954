"""Slowness is not a crash: a live relay renews its bucket leases on a thread of its own,
so only a relay that stopped loses its buckets (and only then is an attempt spent on the
rows it had in flight).

The tests run relays as real processes with ``MAX_ATTEMPTS`` 1: any batch taken over from
a live relay would cost its rows an attempt and bury them, so "nothing dead" is a sharp
test of the promise.
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
from eventferry_django.store.in_flight_journal import InFlightJournal
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
    # Every publisher call takes 1.5 lease timeouts: only leases renewed apart from the
    # relay's work keep the other relay from taking its buckets over and burying its
    # batches. SQLite runs one relay.
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
        # Lock a row the relay has in flight: its ack (and the claim sharing its
        # transaction) waits for it, three leases long, while a competitor joins.
        journal = InFlightJournal()
        wait_until(lambda: bool(journal.entries()), timeout=60, what="the relay to claim")
        row_id = min(i for entry in journal.entries() for i in entry.ids)
        if row_locker.lock(row_id) != Status.PENDING:
            pytest.skip("the relay settled the row before the test could lock it")
        relays.append(start_relay(settings, "--batch-size", "10", "--poll-interval", "0.2",
                                  log=logs[1]))
        # The competitor claims while the held relay's leases would have run out.
        wait_until(lambda: logs[1].exists() and "starting:" in logs[1].read_text(),
                   timeout=60, what="the competitor to start")
        time.sleep(lease * 3)
        assert OutboxEvent.objects.get(id=row_id).status == Status.PENDING
        row_locker.unlock()
        wait_until(settled, timeout=120, what="the outbox to settle")
    finally:
        row_locker.unlock()
        stop_all(relays, logs)
    assert outcomes() == {(Status.DONE, 0): 40}
