#!/usr/bin/env python
"""Scale figures: a big retained outbox, a purge under load, a long drain. Prints one table.

    python benchmarks/scale.py --db postgres      # or mariadb; --retained/--purge/--drain

On a private database and RabbitMQ node (:mod:`benchmarks.servers`), side by side in one
run:
- claim time (100 rows, 1,000 aggregates) on an outbox with no retained rows, then with
  ``--retained`` (10,000,000) done rows kept for history, after the ANALYZE that
  autovacuum would run; the goal is at most 1.2x;
- ``outbox_purge`` deleting ``--purge`` (1,000,000) of those done rows while a relay
  process drains a backlog: the purge's rows/s (goal: 100,000 on PostgreSQL) and the
  relay's events/s meanwhile;
- a relay process draining ``--drain`` (1,000,000) pending events: its peak RSS (goal:
  150 MB) and its rate.
Rows are made by set-based SQL (``generate_series`` on PostgreSQL, a recursive CTE on
MariaDB), never by ``publish_event`` loops.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.servers import PrivateMariaDB, PrivatePostgres, PrivateRabbitMQ  # noqa: E402
from benchmarks.soak import create_database, peak_rss_mb, soak_env  # noqa: E402
from benchmarks.soak_report import table  # noqa: E402

EXCHANGE = "eventferry_soak"
CHUNK = 1_000_000
AGGREGATES = 1000
PAD = 150  # bytes of padding: payloads of about 200 bytes


# -- set-based rows -----------------------------------------------------------------------
def numbers_sql(vendor: str) -> str:
    """A SELECT of ``n`` from %(start)s to %(stop)s (inclusive), set-based."""
    if vendor == "postgresql":
        return "SELECT g AS n FROM generate_series(%(start)s, %(stop)s) AS g"
    # MariaDB: 1,000 x 1,000 from one recursive CTE; the caller adds the offset.
    return ("WITH RECURSIVE d(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM d WHERE k < 999) "
            "SELECT %(start)s + a.k * 1000 + b.k AS n FROM d AS a, d AS b "
            "WHERE %(start)s + a.k * 1000 + b.k <= %(stop)s")


def bucket_sql(aggregate: str, vendor: str) -> str:
    """The bucket of the aggregate id ``aggregate`` (an SQL expression) as
    ``publish_event()`` computes it (``contract.bucket_of``): the first byte of the MD5 of
    its UTF-8 text."""
    if vendor == "postgresql":
        return f"get_byte(decode(md5({aggregate}), 'hex'), 0)"
    return f"CONV(LEFT(MD5({aggregate}), 2), 16, 10)"


def insert_rows(prefix: str, start: int, count: int, *, done: bool) -> None:
    """``count`` rows named ``prefix-n``, done two days ago or pending, over 1,000
    aggregates, in chunks of a million per statement."""
    from django.db import connection

    from eventferry_django.models import OutboxEvent

    table_name = connection.ops.quote_name(OutboxEvent._meta.db_table)
    vendor = connection.vendor
    concat = ("%(prefix)s || n" if vendor == "postgresql" else "CONCAT(%(prefix)s, n)")
    aggregate = ("(n %% 1000)::text" if vendor == "postgresql" else "CAST(n %% 1000 AS CHAR)")
    payload = ("jsonb_build_object('n', n, 'pad', repeat('x', %(pad)s))"
               if vendor == "postgresql" else "JSON_OBJECT('n', n, 'pad', REPEAT('x', %(pad)s))")
    ago = ("now() - interval '2 days'" if vendor == "postgresql"
           else "UTC_TIMESTAMP(3) - INTERVAL 2 DAY")
    status, processed = (2, ago) if done else (0, "NULL")
    # With a server-side modulo in the text, psycopg wants %% for %, as pymysql does.
    sql = (f"INSERT INTO {table_name} (message_id, topic, aggregate_type, aggregate_id, "
           f"payload, headers, status, attempts, created_at, processed_at) "
           f"SELECT {concat}, 'scale.event', 'account', {aggregate}, {payload}, '{{}}', "
           f"{status}, {1 if done else 0}, {ago}, {processed} FROM ({numbers_sql(vendor)}) AS s")
    for first in range(start, start + count, CHUNK):
        last = min(start + count, first + CHUNK) - 1
        with connection.cursor() as cursor:
            cursor.execute(sql, {"prefix": f"{prefix}-", "start": first, "stop": last,
                                 "pad": PAD})


def analyze() -> None:
    from django.db import connection

    from eventferry_django.models import OutboxEvent

    name = connection.ops.quote_name(OutboxEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {name}" if connection.vendor == "postgresql"
                       else f"ANALYZE TABLE {name}")
        if connection.vendor != "postgresql":
            cursor.fetchall()


# -- the figures --------------------------------------------------------------------------
def claim_ms(prefix: str, claims: int = 60, batch: int = 100) -> float:
    """Median time of a 100-row claim (each claim acked before the next)."""
    from eventferry_django.store.outbox import OutboxStore, Settlement

    insert_rows(prefix, 0, claims * batch, done=False)
    analyze()
    store = OutboxStore()
    times = []
    for _ in range(claims):
        started = time.perf_counter()
        events = store.claim(batch)
        times.append((time.perf_counter() - started) * 1000)
        if events:
            store.settle(Settlement(events[0].batch, delivered=events))
    return statistics.median(times)


def start_relay(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "django", "outbox_relay", "--until-empty",
             "--batch-size", "500"],
            env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)


def done_count(prefix: str) -> int:
    from eventferry_django.models import OutboxEvent

    return OutboxEvent.objects.done().filter(message_id__startswith=f"{prefix}-").count()


def purge_under_load(env: dict[str, str], logs: Path, rows: int, backlog: int
                     ) -> tuple[float, float]:
    """(purge rows/s, relay events/s meanwhile)."""
    from django.core.management import call_command

    insert_rows("backlog", 0, backlog, done=False)
    relay = start_relay(env, logs / "purge-relay.log")
    try:
        time.sleep(3.0)  # the relay is up and draining
        before = done_count("backlog")
        started = time.perf_counter()
        call_command("outbox_purge", "--older-than", "1d", "--max-rows", str(rows),
                     "--batch-size", "5000", verbosity=0, stdout=io.StringIO())
        elapsed = time.perf_counter() - started
        drained = done_count("backlog") - before
    finally:
        relay.send_signal(signal.SIGTERM)
        relay.wait(600)
    return rows / elapsed, drained / elapsed


def drain(env: dict[str, str], logs: Path, events: int) -> tuple[float, float]:
    """(relay peak RSS in MB, events/s) over a drain of ``events`` pending rows."""
    insert_rows("drain", 0, events, done=False)
    analyze()
    relay = start_relay(env, logs / "drain-relay.log")
    started = time.perf_counter()
    peak = 0.0
    try:
        while relay.poll() is None:
            peak = max(peak, peak_rss_mb(relay.pid))
            time.sleep(0.5)
    finally:
        if relay.poll() is None:
            relay.kill()
    elapsed = time.perf_counter() - started
    if relay.returncode != 0:
        raise RuntimeError(f"the drain's relay exited with {relay.returncode}; see {logs}")
    return peak, events / elapsed


def declare_capped_queue(url: str) -> None:
    """A queue that keeps only the newest 10,000 messages: the broker confirms every
    message (it is routed) without holding a million of them."""
    import kombu

    with kombu.Connection(url) as conn:
        exchange = kombu.Exchange(EXCHANGE, "topic", durable=True)
        kombu.Queue("eventferry_scale", exchange, routing_key="#", durable=True,
                    queue_arguments={"x-max-length": 10_000})(conn.channel()).declare()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("postgres", "mariadb"), default="postgres")
    parser.add_argument("--retained", type=int, default=10_000_000)
    parser.add_argument("--purge", type=int, default=1_000_000)
    parser.add_argument("--backlog", type=int, default=200_000)
    parser.add_argument("--drain", type=int, default=1_000_000)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    base = Path(tempfile.mkdtemp(prefix="ef-scale-"))
    base.chmod(0o755)  # the private PostgreSQL runs as postgres when we are root
    logs = base / "logs"
    logs.mkdir()
    database = (PrivatePostgres if args.db == "postgres" else PrivateMariaDB)(base / "db")
    rows: list[tuple[str, str, str]] = []
    with database, PrivateRabbitMQ(base / "rabbitmq") as broker:
        create_database(args.db, database.port)
        env = soak_env(args.db, database.port, broker.url, 500)
        os.environ.update(env)
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0, run_syncdb=True)
        declare_capped_queue(broker.url)
        timings: dict[str, Any] = {}
        empty = claim_ms("empty")
        started = time.perf_counter()
        insert_rows("done", 0, args.retained, done=True)
        analyze()
        timings["seed"] = time.perf_counter() - started
        retained = claim_ms("retained")
        purge_rate, relay_rate = purge_under_load(env, logs, args.purge, args.backlog)
        peak, drain_rate = drain(env, logs, args.drain)
        name = database.name
        rows = [
            (f"claim of 100, empty outbox ({name})", f"{empty:.2f} ms", ""),
            (f"claim of 100, {args.retained:,} done rows retained ({name})",
             f"{retained:.2f} ms", ""),
            ("retained / empty", f"{retained / empty:.2f}x", "<= 1.2x"),
            (f"bulk insert of the retained rows (set-based SQL, {name})",
             f"{args.retained / timings['seed']:,.0f} rows/s", ""),
            (f"outbox_purge of {args.purge:,} done rows while a relay drains ({name})",
             f"{purge_rate:,.0f} rows/s", ">= 100,000" if args.db == "postgres" else ""),
            ("relay drain rate during the purge (batch 500)", f"{relay_rate:,.0f} events/s",
             ""),
            (f"relay peak RSS, drain of {args.drain:,} events ({name})", f"{peak:,.0f} MB",
             "<= 150 MB"),
            ("relay drain rate over that drain (batch 500)", f"{drain_rate:,.0f} events/s",
             ""),
        ]
    print(f"{database.name} (private, {dt.date.today()}), RabbitMQ (private), "
          f"{os.cpu_count()} cores")
    print(table(rows, ("figure", "value", "goal")))
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
