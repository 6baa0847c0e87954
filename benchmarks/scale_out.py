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
import shutil
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
from benchmarks.scale import numbers_sql  # noqa: E402
from benchmarks.soak_report import table  # noqa: E402

PAD = 150  # payloads of about 200 bytes, as in benchmarks/scale.py
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# -- CPU ----------------------------------------------------------------------------------
def machine_ticks() -> tuple[int, int]:
    """The machine's busy and total CPU time so far, in clock ticks (``/proc/stat``)."""
    with open("/proc/stat") as stat:
        ticks = [int(n) for n in stat.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle and iowait
    return sum(ticks) - idle, sum(ticks)


def process_ticks(root: int) -> int:
    """CPU ticks used so far by process ``root`` (all its threads) and its children,
    those that exited included (a database server's postmaster and its backends, which
    come and go: autovacuum workers, say)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == root:  # utime, stime, and its children's that it has waited for
            total += sum(int(fields[n]) for n in (11, 12, 13, 14))
        elif ppid == root:
            total += int(fields[11]) + int(fields[12])
    return total


# -- the databases ------------------------------------------------------------------------
class Database:
    """A private server, the Django settings that reach it, and its set-based SQL."""

    vendor: str
    server: servers.PrivateServer

    def __enter__(self) -> Database:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(None, None, None)

    def env(self) -> dict[str, str]:
        raise NotImplementedError

    def server_pid(self) -> int:
        raise NotImplementedError

    def create(self) -> None:
        raise NotImplementedError

    def empty(self) -> None:
        raise NotImplementedError

    def top_statements(self) -> list[str]:
        return []


class StatementsPostgres(servers.PrivatePostgres):
    """The private PostgreSQL with ``pg_stat_statements`` loaded (``--statements``)."""

    def start(self) -> None:
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("shared_preload_libraries = 'pg_stat_statements'\n"
                       "pg_stat_statements.track = all\n")
        super().start()


class Postgres(Database):
    vendor = "postgresql"

    def __init__(self, base: Path, statements: bool = False) -> None:
        self.server = (StatementsPostgres if statements else servers.PrivatePostgres)(base)
        self.statements = statements

    def env(self) -> dict[str, str]:
        return {"EVENTFERRY_SOAK_VENDOR": "postgres",
                "EVENTFERRY_SOAK_DB_HOST": str(self.server.base),
                "EVENTFERRY_SOAK_DB_PORT": str(self.server.port)}

    def server_pid(self) -> int:
        return int((self.server.data / "postmaster.pid").read_text().split()[0])

    def create(self) -> None:
        import psycopg

        with psycopg.connect(host=str(self.server.base), port=self.server.port, user="postgres",
                             dbname="postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE soak")

    def empty(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {outbox_table()}")
            cursor.execute(f"VACUUM ANALYZE {outbox_table()}")
            if self.statements:
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                cursor.execute("SELECT pg_stat_statements_reset()")

    def top_statements(self) -> list[str]:
        """The statements that took the most time since :meth:`empty`: calls, ms and
        shared buffers per call, rows per call."""
        if not self.statements:
            return []
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT calls, total_exec_time / calls, (shared_blks_hit + shared_blks_read) "
                "/ calls, rows / calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) "
                "FROM pg_stat_statements WHERE calls > 0 ORDER BY total_exec_time DESC LIMIT 8")
            return [f"  {calls:>7,} calls {ms:8.2f} ms {blocks:9,.0f} buffers {rows:6,.0f} rows "
                    f"{query}" for calls, ms, blocks, rows, query in cursor.fetchall()]


class StatementsMariaDB(servers.PrivateMariaDB):
    """The private MariaDB with the performance schema on (``--statements``)."""

    def _options(self) -> list[str]:
        return [*super()._options(), "--performance-schema=ON"]


class Mariadb(Database):
    vendor = "mysql"

    def __init__(self, base: Path, statements: bool = False) -> None:
        self.server = (StatementsMariaDB if statements else servers.PrivateMariaDB)(base)
        self.statements = statements

    def env(self) -> dict[str, str]:
        return {"EVENTFERRY_SOAK_VENDOR": "mariadb",
                "EVENTFERRY_SOAK_DB_HOST": str(self.server.base / "mysqld.sock"),
                "EVENTFERRY_SOAK_DB_PORT": str(self.server.port)}

    def server_pid(self) -> int:
        return int((self.server.base / "mysqld.pid").read_text().split()[0])

    def create(self) -> None:
        import pymysql

        conn = pymysql.connect(unix_socket=str(self.server.base / "mysqld.sock"), user="root")
        with conn.cursor() as cursor:
            cursor.execute("CREATE DATABASE soak CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        conn.close()

    def empty(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE TABLE {outbox_table()}")
            cursor.execute(f"ANALYZE TABLE {outbox_table()}")
            cursor.fetchall()
            if self.statements:
                cursor.execute("TRUNCATE performance_schema.events_statements_summary_by_digest")

    def top_statements(self) -> list[str]:
        """The statements that took the most time since :meth:`empty`: calls, ms per
        call, rows examined and sent per call."""
        if not self.statements:
            return []
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count_star, sum_timer_wait / count_star / 1e9, sum_rows_examined / "
                "count_star, sum_rows_sent / count_star, left(digest_text, 70) "
                "FROM performance_schema.events_statements_summary_by_digest "
                "WHERE count_star > 0 ORDER BY sum_timer_wait DESC LIMIT 8")
            return [f"  {calls:>7,} calls {ms:8.2f} ms {examined:9,.0f} examined "
                    f"{sent:6,.0f} rows {query}"
                    for calls, ms, examined, sent, query in cursor.fetchall()]


DATABASES = {"postgresql": Postgres, "mariadb": Mariadb}


def outbox_table() -> str:
    from django.db import connection

    from eventferry_django.models import OutboxEvent

    return connection.ops.quote_name(OutboxEvent._meta.db_table)


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
    # The aggregate's bucket as publish_event() computes it (contract.bucket_of): the
    # first byte of the MD5 of its UTF-8 text.
    bucket = (f"get_byte(decode(md5({aggregate}), 'hex'), 0)" if postgres
              else f"CONV(LEFT(MD5({aggregate}), 2), 16, 10)")
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {outbox_table()} (message_id, topic, aggregate_type, aggregate_id, "
            f"payload, headers, bucket) SELECT {concat}, 'scale.event', 'account', "
            f"{aggregate}, {payload}, '{{}}', {bucket} "
            f"FROM ({numbers_sql(connection.vendor)}) AS s ORDER BY n",
            {"prefix": f"so-{time.time_ns()}-", "start": 0, "stop": events - 1, "pad": PAD,
             "aggregates": aggregates})


def any_open() -> bool:
    """Whether a row is still open: one seek, so the polling costs the database nothing
    that would show in its CPU per event (counting 290,000 open rows ten times a second
    took a third of the database's time)."""
    from eventferry_django.models import OutboxEvent

    return OutboxEvent.objects.open().exists()


def checked_in() -> int:
    from django.db import connection

    from eventferry_django.store.outbox import OutboxStore

    registry = OutboxStore().dialect.name.relay_registry.quoted(connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {registry}")
        return int(cursor.fetchone()[0])


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
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()


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
    settings = {"PUBLISHER": {"BACKEND": "benchmarks.simulated_broker.SimulatedBroker",
                              "OPTIONS": options}}
    return dict(os.environ, PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="benchmarks.soak_settings",
                EVENTFERRY_SOAK_EVENTFERRY=json.dumps(settings), **database.env())


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
    if len(vendors) > 1:
        # Django is set up once per process: one process per database.
        for name in vendors:
            subprocess.run([sys.executable, __file__, *sys.argv[1:], "--vendors", name],
                           check=True)
        return
    base = Path(tempfile.mkdtemp(prefix="ef-scale-out-"))
    base.chmod(0o755)  # a private PostgreSQL runs as postgres when we are root
    logs = base / "logs"
    logs.mkdir()
    try:
        report(vendors[0], args, counts, burst_counts, rtts, base, logs)
    finally:
        shutil.rmtree(base, ignore_errors=True)


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
