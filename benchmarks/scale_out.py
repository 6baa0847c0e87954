#!/usr/bin/env python
"""More relays, more throughput? Drains a deep backlog and a burst with 1 to 12 relays.
Prints one table per database.

    python benchmarks/scale_out.py                           # PostgreSQL and MariaDB, the grid
    python benchmarks/scale_out.py --vendors postgresql --relays 1,2,4 --rtts 0

For each database a private server of its own (:mod:`benchmarks.servers`; PostgreSQL on a
unix socket, MariaDB on its socket too), and for each broker round trip and relay count:

- **deep backlog**: the relays start (``outbox_relay``, the settings' defaults) and check
  in with the relay registry; then ``--events`` pending rows over ``--aggregates``
  aggregates are committed in one statement, and the clock runs from that commit to the
  last row done;
- **burst**: ``--burst-events`` rows over ``--burst-aggregates`` aggregates wait first,
  then the relays start together; the shares say whether each took its part.

The relays publish to :class:`benchmarks.simulated_broker.SimulatedBroker`, which confirms
each batch after the round trip (``--rtts``): a real broker's CPU would share the machine
and blur what the claim costs. Columns: events/s; the speed-up against one relay; the
smallest and largest share of the events a relay published; how busy the machine was
(every core); the database server's CPU time per event (all its processes, from
``/proc``).

On a machine without Debian's PostgreSQL (a lent device machine), ``--pg-bin`` names the
directory of another build's ``initdb`` and ``postgres`` (the ``pgserver`` wheel carries
one: ``python -c "import pgserver, pathlib; print(pathlib.Path(pgserver.__file__).parent
/ 'pginstall/bin')"``), and ``--vendors postgresql`` leaves MariaDB out.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import servers  # noqa: E402
from benchmarks.cpu import CLOCK_TICKS, machine_ticks, process_ticks  # noqa: E402
from benchmarks.drain_databases import (  # noqa: E402
    DATABASES,
    Database,
    checked_in,
    in_a_process_each,
    outbox_table,
    private_directory,
)
from benchmarks.processes import terminate  # noqa: E402
from benchmarks.scale import bucket_sql, numbers_sql  # noqa: E402
from benchmarks.soak_report import table  # noqa: E402

PAD = 150  # payloads of about 200 bytes, as in benchmarks/scale.py


def insert_pending(events: int, aggregates: int) -> None:
    """``events`` pending rows dealt round-robin over ``aggregates`` aggregates, so every
    aggregate has a backlog from the start; one statement, one commit."""
    from django.db import connection

    postgres = connection.vendor == "postgresql"
    concat = "%(prefix)s || n" if postgres else "CONCAT(%(prefix)s, n)"
    aggregate = ("'agg-' || lpad((n %% %(aggregates)s)::text, 5, '0')" if postgres
                 else "CONCAT('agg-', LPAD(n %% %(aggregates)s, 5, '0'))")
    payload = ("jsonb_build_object('n', n, 'pad', repeat('x', %(pad)s))" if postgres
               else "JSON_OBJECT('n', n, 'pad', REPEAT('x', %(pad)s))")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {outbox_table()} (message_id, topic, aggregate_type, aggregate_id, "
            f"payload, headers, bucket) SELECT {concat}, 'scale.event', 'account', "
            f"{aggregate}, {payload}, '{{}}', {bucket_sql(aggregate, connection.vendor)} "
            f"FROM ({numbers_sql(connection.vendor)}) AS s ORDER BY n",
            {"prefix": f"so-{time.time_ns()}-", "start": 0, "stop": events - 1, "pad": PAD,
             "aggregates": aggregates})


def any_open() -> bool:
    """Whether a row is still open: one seek, so the polling costs the database nothing
    that would show in its CPU per event (counting 290,000 open rows ten times a second
    took a third of the database's time)."""
    from eventferry_django.models import OutboxEvent

    return OutboxEvent.objects.open().exists()


# -- the relays ---------------------------------------------------------------------------
@dataclass
class Fleet:
    """``count`` relay processes publishing to the simulated broker; their shares are
    read from the files the broker keeps under ``counts``."""

    count: int
    env: dict[str, str]
    logs: Path
    counts: Path

    def __post_init__(self) -> None:
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> None:
        for n in range(self.count):
            with (self.logs / f"relay-{self.count}-{n}.log").open("ab") as out:
                self.processes.append(subprocess.Popen(
                    [sys.executable, "-m", "django", "outbox_relay", "--relay-id", f"r{n}",
                     "--poll-interval", "0.2"],
                    env=dict(self.env, EVENTFERRY_BENCH_RELAY=f"r{n}"), cwd=ROOT, stdout=out,
                    stderr=subprocess.STDOUT))

    def wait_checked_in(self) -> None:
        deadline = time.monotonic() + 120
        while checked_in() < self.count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"relays did not check in; see {self.logs}")
            time.sleep(0.1)

    def check(self) -> None:
        """Fail fast when a relay exited by itself (the drain would never end)."""
        for process in self.processes:
            if process.poll() is not None:
                raise RuntimeError(f"a relay exited with {process.returncode}; see {self.logs}")

    def shares(self) -> list[int]:
        return [int(path.read_text()) if path.exists() else 0
                for path in (self.counts / f"r{n}" for n in range(self.count))]

    def stop(self) -> None:
        terminate(self.processes, 60)


@contextlib.contextmanager
def fleet(database: Database, count: int, rtt_ms: float, logs: Path) -> Iterator[Fleet]:
    counts = Path(tempfile.mkdtemp(dir=logs))
    relays = Fleet(count, relay_env(database, rtt_ms, counts), logs, counts)
    try:
        yield relays
    finally:
        relays.stop()


@dataclass(frozen=True)
class Drain:
    events: int
    seconds: float
    shares: list[int]
    #: The machine's busy share of every core during the drain.
    busy: float
    #: The database server's CPU microseconds per event.
    db_us: float

    @property
    def rate(self) -> float:
        return self.events / self.seconds


def wait_drained(relays: Fleet, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while any_open():
        if time.monotonic() > deadline:
            raise RuntimeError("the outbox did not drain")
        relays.check()
        time.sleep(0.1)


def measured(database: Database, events: int, run: Iterator[Fleet]) -> Drain:
    """Runs ``run`` (a generator that sets up, yields once when the clock should start,
    and returns when done), timing from the yield to the drain: the machine's and the
    database's CPU too, so the INSERT of the events is not in them."""
    relays = next(run)
    pid = database.server_pid()
    started, (busy, total), db = time.perf_counter(), machine_ticks(), process_ticks(pid)
    with contextlib.suppress(StopIteration):
        next(run)
    seconds = time.perf_counter() - started
    busy_after, total_after = machine_ticks()
    db_us = (process_ticks(pid) - db) / CLOCK_TICKS * 1e6 / events
    busy_share = (busy_after - busy) / max(total_after - total, 1)
    return Drain(events, seconds, relays.shares(), busy_share, db_us)


def deep(database: Database, count: int, events: int, aggregates: int, rtt_ms: float,
         logs: Path) -> Iterator[Fleet]:
    database.empty()
    with fleet(database, count, rtt_ms, logs) as relays:
        relays.start()
        relays.wait_checked_in()
        time.sleep(2.5)  # every relay has seen the last to check in
        insert_pending(events, aggregates)
        yield relays  # the clock starts at the commit
        wait_drained(relays)


def burst(database: Database, count: int, events: int, aggregates: int, rtt_ms: float,
          logs: Path) -> Iterator[Fleet]:
    database.empty()
    insert_pending(events, aggregates)
    with fleet(database, count, rtt_ms, logs) as relays:
        yield relays
        relays.start()
        wait_drained(relays)


def relay_env(database: Database, rtt_ms: float, counts: Path | None = None
              ) -> dict[str, str]:
    options: dict[str, object] = {"rtt": rtt_ms / 1000}
    if counts is not None:
        options["counts"] = str(counts)
    return publisher_env(database, {"BACKEND": "benchmarks.simulated_broker.SimulatedBroker",
                                    "OPTIONS": options})


def publisher_env(database: Database, publisher: dict[str, object]) -> dict[str, str]:
    """The environment of a relay process on ``database`` whose ``PUBLISHER`` setting is
    ``publisher``."""
    # Keeps what PYTHONPATH already holds: on a device machine, the carried wheels.
    path = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    return dict(os.environ, PYTHONPATH=path, DJANGO_SETTINGS_MODULE="benchmarks.soak_settings",
                EVENTFERRY_SOAK_EVENTFERRY=json.dumps({"PUBLISHER": publisher}),
                **database.env())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vendors", default="postgresql,mariadb")
    parser.add_argument("--relays", default="1,2,4,8,12")
    parser.add_argument("--rtts", default="0,10", help="the simulated broker's round trip, ms")
    parser.add_argument("--events", type=int, default=290_000)
    parser.add_argument("--aggregates", type=int, default=1000)
    parser.add_argument("--burst-events", type=int, default=20_000)
    parser.add_argument("--burst-aggregates", type=int, default=100)
    parser.add_argument("--burst-relays", default="2,4")
    parser.add_argument("--rounds", type=int, default=1,
                        help="interleaved rounds; the table shows medians")
    parser.add_argument("--statements", action="store_true",
                        help="PostgreSQL: load pg_stat_statements and print the costliest "
                        "statements of each deep drain")
    parser.add_argument("--pg-bin", type=Path, default=None,
                        help="where initdb and postgres are (default: Debian's PostgreSQL 15)")
    args = parser.parse_args()
    if args.pg_bin:
        servers.PG_BIN = args.pg_bin
    counts = [int(n) for n in args.relays.split(",")]
    burst_counts = [int(n) for n in args.burst_relays.split(",") if n]
    rtts = [float(ms) for ms in args.rtts.split(",")]
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    vendors = args.vendors.split(",")
    if in_a_process_each(vendors, __file__):
        return
    with private_directory("ef-scale-out-") as base:
        logs = base / "logs"
        logs.mkdir()
        report(vendors[0], args, counts, burst_counts, rtts, base, logs)


def report(name: str, args: argparse.Namespace, counts: list[int], burst_counts: list[int],
           rtts: list[float], base: Path, logs: Path) -> None:
    deep_runs: dict[tuple[float, int], list[Drain]] = {}
    burst_runs: dict[int, list[Drain]] = {}
    database = DATABASES[name](base / name, args.statements)
    with database:
        database.create()
        os.environ.update(relay_env(database, 0))
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connections

        connections.close_all()
        call_command("migrate", verbosity=0, run_syncdb=True)
        for round_ in range(1, args.rounds + 1):
            for rtt in rtts:
                for count in counts:
                    run = measured(database, args.events, deep(
                        database, count, args.events, args.aggregates, rtt, logs))
                    deep_runs.setdefault((rtt, count), []).append(run)
                    print(f"{name}, round {round_}, {rtt:g} ms, {count} relay(s): "
                          f"{run.rate:,.0f} ev/s, shares {run.shares}, machine {run.busy:.0%}"
                          f" busy, database {run.db_us:.0f} us/event", flush=True)
                    print("\n".join(database.top_statements()), flush=True)
            for count in burst_counts:
                run = measured(database, args.burst_events, burst(
                    database, count, args.burst_events, args.burst_aggregates, rtts[0], logs))
                burst_runs.setdefault(count, []).append(run)
                print(f"{name}, round {round_}, burst, {count} relays: shares {run.shares}",
                      flush=True)
        connections.close_all()
    print_tables(name, args, counts, rtts, deep_runs, burst_runs)


def print_tables(name: str, args: argparse.Namespace, counts: list[int], rtts: list[float],
                 deep_runs: dict[tuple[float, int], list[Drain]],
                 burst_runs: dict[int, list[Drain]]) -> None:
    def median_run(drains: list[Drain]) -> Drain:
        return sorted(drains, key=lambda d: d.rate)[len(drains) // 2]

    rows = []
    for rtt in rtts:
        one = median_run(deep_runs[rtt, counts[0]])
        for count in counts:
            run = median_run(deep_runs[rtt, count])
            shares = [s / run.events for s in run.shares]
            rows.append((f"{rtt:g} ms", str(count), f"{run.rate:,.0f}",
                         f"{run.rate / one.rate:.2f}x", f"{min(shares):.1%}",
                         f"{max(shares):.1%}", f"{run.busy:.0%}", f"{run.db_us:.0f}",
                         f"{run.db_us / one.db_us:.2f}x"))
    print(f"\n{name} ({dt.date.today()}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}): {args.events:,} events over {args.aggregates:,} "
          f"aggregates, committed in one statement while the relays wait; median of "
          f"{args.rounds} round(s)")
    print(table(rows, ("round trip", "relays", "events/s", "speed-up", "smallest share",
                       "largest share", "machine busy", "db us/event", "db vs 1 relay")))
    if burst_runs:
        rows = []
        for count, drains in sorted(burst_runs.items()):
            run = median_run(drains)
            shares = [s / run.events for s in run.shares]
            rows.append((str(count), f"{run.rate:,.0f}", f"{min(shares):.1%}",
                         f"{max(shares):.1%}"))
        print(f"\nburst: {args.burst_events:,} events over {args.burst_aggregates} aggregates "
              f"waiting, then the relays start together ({rtts[0]:g} ms)")
        print(table(rows, ("relays", "events/s", "smallest share", "largest share")))


if __name__ == "__main__":
    main()
