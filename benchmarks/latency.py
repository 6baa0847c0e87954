#!/usr/bin/env python
"""Commit-to-broker latency under a steady trickle, this tree against another commit.
Prints one table.

    python benchmarks/latency.py                      # 2 relays, 200 events/s, 50 aggregates
    python benchmarks/latency.py --against 871d0e9 --relays 1,2 --rounds 2

What a user of a live system feels: each event committed in a transaction of its own, at
``--rate`` events/s spread over ``--aggregates`` aggregates, for ``--seconds`` seconds,
while ``--relays`` relays of a tree (``outbox_relay`` with the settings' defaults, woken
by PostgreSQL's NOTIFY) publish them to RabbitMQ on loopback. A consumer in this process
takes the clock of each message's arrival; the latency is arrival minus the commit's
return. Each round runs every tree in turn, their order alternating, each on a fresh
database of a private PostgreSQL (``fsync`` on, as :mod:`benchmarks.database_cost`'s),
migrated by that tree. The events are written by one INSERT and a ``pg_notify`` naming
the row's bucket in the same transaction, what ``publish_event()`` sends, so both trees
see the same writes (a relay of 0.1.0 ignores the payload).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import servers  # noqa: E402
from benchmarks.cpu import CLOCK_TICKS, process_ticks  # noqa: E402
from benchmarks.database_cost import BASELINE, Tree, commit_tree, started, tree_env  # noqa: E402
from benchmarks.drain_databases import (  # noqa: E402
    DATABASES,
    Database,
    outbox_table,
    private_directory,
)
from benchmarks.processes import terminate  # noqa: E402
from benchmarks.scale import bucket_sql  # noqa: E402
from benchmarks.scale_out import publisher_env  # noqa: E402
from benchmarks.soak_report import table  # noqa: E402

AMQP_URL = os.environ.get("EVENTFERRY_BENCH_AMQP", "amqp://guest:guest@127.0.0.1:5672//")


def relay_env(database: Database, tree: Tree, exchange: str) -> dict[str, str]:
    """A relay of ``tree`` on ``database``, publishing to ``exchange`` on RabbitMQ."""
    return tree_env(database, tree, publisher_env(database, {
        "BACKEND": "eventferry_django.publishers.kombu.KombuPublisher",
        "OPTIONS": {"url": AMQP_URL, "exchange": exchange}}))


class Arrivals:
    """A consumer on its own thread and connection: the clock of each message's arrival,
    by message id, from a queue bound to ``exchange`` before anything is published."""

    def __init__(self, exchange: str) -> None:
        import kombu

        self.at: dict[str, float] = {}
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._connection = kombu.Connection(AMQP_URL)
        self._queue = kombu.Queue(f"{exchange}.latency", kombu.Exchange(exchange, "topic"),
                                  routing_key="#", auto_delete=True)
        self._thread = threading.Thread(target=self._consume, daemon=True)

    def __enter__(self) -> Arrivals:
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the consumer did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self._connection.release()

    def _consume(self) -> None:
        def on_message(body: Any, message: Any) -> None:
            self.at[message.properties["message_id"]] = time.perf_counter()
            message.ack()

        with self._connection.Consumer(self._queue, callbacks=[on_message], accept=["json"]):
            self._ready.set()
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    self._connection.drain_events(timeout=0.2)


def trickle(rate: float, seconds: float, aggregates: int) -> dict[str, float]:
    """Commit one event a transaction at ``rate`` a second for ``seconds``; the clock of
    each commit's return, by message id."""
    from django.db import connection, transaction

    from eventferry_django.store.outbox import OutboxStore

    aggregate = "%(aggregate)s"
    insert = (f"INSERT INTO {outbox_table()} (message_id, topic, aggregate_type, aggregate_id, "
              f"payload, headers, bucket) VALUES (%(message_id)s, 'latency.event', 'account', "
              f"{aggregate}, %(payload)s, '{{}}', {bucket_sql(aggregate, connection.vendor)}) "
              "RETURNING bucket")
    channel = OutboxStore().dialect.name.notify_channel
    committed: dict[str, float] = {}
    start = time.perf_counter()
    for n in range(int(rate * seconds)):
        time.sleep(max(0.0, start + n / rate - time.perf_counter()))
        message_id = str(uuid.uuid4())
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(insert, {"message_id": message_id, "payload": json.dumps({"n": n}),
                                    "aggregate": f"agg-{n % aggregates:03d}"})
            cursor.execute("SELECT pg_notify(%s, %s::text)", [channel, cursor.fetchone()[0]])
        committed[message_id] = time.perf_counter()
    return committed


@dataclass(frozen=True)
class Trickle:
    """One trickle's latencies (ms, in order) and the CPU the database server and the
    relays spent on it, per event (us)."""

    latencies: list[float]
    database_us: float
    relays_us: float


def run(database: Database, tree: Tree, relays: int, args: argparse.Namespace, logs: Path
        ) -> Trickle:
    """One trickle through ``relays`` relays of ``tree``."""
    from django.db import connections

    connections.close_all()
    database.drop()
    database.create()
    exchange = f"ef-latency-{uuid.uuid4().hex[:8]}"
    env = relay_env(database, tree, exchange)
    subprocess.run([sys.executable, "-m", "django", "migrate", "--run-syncdb", "-v", "0"],
                   cwd=tree.path, env=env, check=True)
    processes = []
    with Arrivals(exchange) as arrivals:
        try:
            for n in range(relays):
                log = logs / f"relay-{tree.name}-{relays}-{n}.log"
                with log.open("wb") as out:
                    processes.append(subprocess.Popen(
                        [sys.executable, "-m", "django", "outbox_relay", "--relay-id", f"r{n}"],
                        cwd=tree.path, env=env, stdout=out, stderr=subprocess.STDOUT))
                started(processes[-1], log)
            server = database.server_pid()
            before = [process_ticks(server), *(process_ticks(p.pid) for p in processes)]
            committed = trickle(args.rate, args.seconds, args.aggregates)
            deadline = time.monotonic() + 60
            while len(arrivals.at.keys() & committed.keys()) < len(committed):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{len(committed) - len(arrivals.at)} events did not "
                                       f"arrive; see {logs}")
                time.sleep(0.1)
            after = [process_ticks(server), *(process_ticks(p.pid) for p in processes)]
        finally:
            terminate(processes, 60)
    per_event = 1e6 / CLOCK_TICKS / len(committed)
    return Trickle(sorted((arrivals.at[m] - at) * 1000 for m, at in committed.items()),
                   (after[0] - before[0]) * per_event,
                   (sum(after[1:]) - sum(before[1:])) * per_event)


def percentile(latencies: list[float], share: float) -> float:
    return latencies[min(len(latencies) - 1, int(len(latencies) * share))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default=BASELINE, help="the commit to compare with")
    parser.add_argument("--relays", default="2", help="relay counts, comma-separated")
    parser.add_argument("--rate", type=float, default=200.0, help="events a second")
    parser.add_argument("--aggregates", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=15.0, help="of trickle, each run")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pg-bin", type=Path, default=None,
                        help="where initdb and postgres are (default: Debian's PostgreSQL 15)")
    args = parser.parse_args()
    if args.pg_bin:
        servers.PG_BIN = args.pg_bin
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    counts = [int(n) for n in args.relays.split(",")]
    with private_directory("ef-latency-") as base:
        trees = [Tree("this tree", ROOT), commit_tree(args.against, base)]
        logs = base / "logs"
        logs.mkdir()
        database = DATABASES["postgresql"](base / "postgresql")
        results: dict[tuple[str, int], list[Trickle]] = {}
        with database:
            database.create()
            os.environ.update(relay_env(database, trees[0], "unused"))
            import django

            django.setup()
            for round_ in range(1, args.rounds + 1):
                for relays in counts:
                    for tree in trees if round_ % 2 else trees[::-1]:
                        done = run(database, tree, relays, args, logs)
                        results.setdefault((tree.name, relays), []).append(done)
                        print(f"round {round_}, {tree.name}, {relays} relay(s): p50 "
                              f"{percentile(done.latencies, 0.5):.1f} ms, p99 "
                              f"{percentile(done.latencies, 0.99):.1f} ms, database "
                              f"{done.database_us:.0f} us/event, relays "
                              f"{done.relays_us:.0f} us/event", flush=True)
            from django.db import connections

            connections.close_all()

    def median(name: str, relays: int, figure: Callable[[Trickle], float]) -> str:
        return f"{statistics.median(figure(r) for r in results[(name, relays)]):.1f}"

    def at(share: float) -> Callable[[Trickle], float]:
        return lambda done: percentile(done.latencies, share)

    print(f"\nPostgreSQL -> RabbitMQ, one event a transaction at {args.rate:g} events/s over "
          f"{args.aggregates} aggregates for {args.seconds:g} s, medians of {args.rounds} "
          f"round(s); {os.cpu_count()} cores; ms from the commit's return to the arrival; CPU "
          "per event (the database's includes the writes)")
    print(table([(tree.name, str(relays), median(tree.name, relays, at(0.5)),
                  median(tree.name, relays, at(0.9)), median(tree.name, relays, at(0.99)),
                  median(tree.name, relays, at(1.0)),
                  median(tree.name, relays, lambda done: done.database_us),
                  median(tree.name, relays, lambda done: done.relays_us))
                 for relays in counts for tree in trees],
                ("tree", "relays", "p50", "p90", "p99", "max", "database CPU us",
                 "relays CPU us")))


if __name__ == "__main__":
    main()
