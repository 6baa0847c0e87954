"""Draining a seeded outbox with a relay process, started as a user starts one, timed
from the database's own records.

``python -m django outbox_relay`` runs with ``benchmarks.settings`` and
``synchronous_commit`` off on PostgreSQL (the raw limit runs with it off too). Each done
row's ``processed_at`` is the database clock at its settlement, so the drain's times
cost the relay nothing to measure:

- end to end: from starting the process to the last row done (start-up included);
- steady state: from the relay's first progress (its first settlement) to the last row
  done, for the rows settled after the first settlement.

The poison drains (:func:`poison_drain`) run a relay whose publisher refuses one
aggregate's head every time (:mod:`benchmarks.refusing`), until it is dead.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from django.db import connection, transaction

from benchmarks.raw_limit import DrainTime
from eventferry_django import NewEvent, publish_events
from eventferry_django.models import OutboxEvent, Status

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD = {"order_id": 0, "customer": "c-42", "total": "129.90", "currency": "EUR",
           "lines": [{"sku": "A-1", "qty": 2, "price": "19.95"},
                     {"sku": "B-7", "qty": 1, "price": "90.00"}]}
#: The aggregate whose head the poison drains refuse.
POISONED = "order-0"


def table() -> str:
    return connection.ops.quote_name(OutboxEvent._meta.db_table)


def vacuum() -> None:
    """What autovacuum does for a busy outbox between phases: without it, one phase's dead
    row versions slow the next phase's index scans, which no steady state would show."""
    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute(f"ANALYZE TABLE {table()}")
            cursor.fetchall()
        else:
            cursor.execute(f"VACUUM ANALYZE {table()}")


def seed(events: int, aggregates: int) -> None:
    """``events`` pending events, dealt round-robin over ``aggregates`` aggregates."""
    OutboxEvent.objects.all().delete()
    for start in range(0, events, 1000):
        with transaction.atomic():
            publish_events([NewEvent("orders.created", {**PAYLOAD, "order_id": n}, "order",
                                     f"order-{n % aggregates}")
                            for n in range(start, min(events, start + 1000))])
    vacuum()


@dataclass(frozen=True)
class Settled:
    """A row as the drain left it: ``at`` is its ``processed_at`` in Unix seconds."""

    id: int
    aggregate_id: str
    status: int
    at: float


def settled_rows() -> list[Settled]:
    epoch = ("EXTRACT(EPOCH FROM processed_at)" if connection.vendor == "postgresql"
             # The column holds UTC wall time; counted from the epoch as such.
             else "TIMESTAMPDIFF(MICROSECOND, '1970-01-01', processed_at) / 1e6")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, aggregate_id, status, {epoch} FROM {table()} "
                       "WHERE processed_at IS NOT NULL ORDER BY id")
        return [Settled(int(i), a, int(s), float(t)) for i, a, s, t in cursor.fetchall()]


def drain_time(rows: list[Settled], started: float) -> DrainTime:
    """End to end from ``started`` (Unix seconds), and steady state after the first
    settlement."""
    first, last = min(r.at for r in rows), max(r.at for r in rows)
    steady = sum(1 for r in rows if r.at > first)
    return DrainTime(len(rows), last - started, steady, last - first)


def open_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table()} WHERE status IN "
                       f"({Status.PENDING}, {Status.CLAIMED}, {Status.FAILED})")
        return int(cursor.fetchone()[0])


def run_relay(options: list[str], env: dict[str, str] | None = None, *, refuse: str = "",
              until_empty: bool = True) -> tuple[float, float]:
    """Run a relay process until it exits by itself (``--until-empty``) or, without
    ``until_empty``, until no row is open; returns when it started (Unix seconds) and
    the CPU seconds it used."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="benchmarks.settings",
               EVENTFERRY_BENCH_SYNC="off", EVENTFERRY_BENCH_REFUSE=refuse, **(env or {}))
    command = [sys.executable, "-m", "django", "outbox_relay", *options]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.time()
    with tempfile.TemporaryFile() as log:
        relay = subprocess.Popen([*command, "--until-empty"] if until_empty else command,
                                 env=env, cwd=ROOT, stdout=log, stderr=log)
        if not until_empty:
            while open_rows():
                time.sleep(0.2)
            relay.send_signal(signal.SIGTERM)
        if relay.wait(120) != 0:
            log.seek(0)
            raise RuntimeError(f"the relay exited with {relay.returncode}:\n"
                               + log.read().decode(errors="replace"))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return started, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def relay_drain(events: int, options: list[str], env: dict[str, str] | None = None
                ) -> tuple[DrainTime, float]:
    """Drain the seeded outbox with one relay; its times and CPU seconds."""
    started, cpu = run_relay(options, env)
    rows = settled_rows()
    assert len(rows) == events and all(r.status == Status.DONE for r in rows), \
        "the relay did not publish every event"
    return drain_time(rows, started), cpu


@dataclass(frozen=True)
class PoisonDrain:
    """The healthy aggregates' figures, and what the poisoned aggregate's later events did."""

    healthy: DrainTime
    #: Seconds from the relay's first settlement until 99% of the healthy events were done
    #: (start-up left out: on a loaded machine it varies by seconds).
    p99: float
    #: Whether the poisoned aggregate's head ended dead (done without poison) and every
    #: later event of it done.
    settled: bool
    #: Later events of the poisoned aggregate done before its head was settled: those
    #: that went out in one chain with the head the first time it was refused.
    overtook: int


def poison_drain(events: int, *, poisoned: bool) -> PoisonDrain:
    """Drain the seeded outbox with a relay that, if ``poisoned``, refuses the head of
    :data:`POISONED` every time; the relay runs until no row is open."""
    head = OutboxEvent.objects.filter(aggregate_id=POISONED).order_by("id").first()
    assert head is not None
    started, _ = run_relay([], refuse=head.message_id if poisoned else "", until_empty=False)
    rows = settled_rows()
    assert len(rows) == events, "rows were left open"
    healthy = [r for r in rows if r.aggregate_id != POISONED]
    behind = [r for r in rows if r.aggregate_id == POISONED and r.id != head.id]
    settled_head = next(r for r in rows if r.id == head.id)
    first = min(r.at for r in rows)
    latencies = sorted(r.at - first for r in healthy)
    return PoisonDrain(
        drain_time(healthy, started), latencies[int(len(latencies) * 0.99) - 1],
        settled=(settled_head.status == (Status.DEAD if poisoned else Status.DONE)
                 and all(r.status == Status.DONE for r in behind)),
        overtook=sum(1 for r in behind if r.at < settled_head.at),
    )
