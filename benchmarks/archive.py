#!/usr/bin/env python
"""History pipeline benchmark on PostgreSQL with Spark in local mode. Prints one table.

    python benchmarks/archive.py [--rows 1000000] [--master local[2]] [--partitions N]

Seeds ``--rows`` done rows with one INSERT ... SELECT over generate_series (about
200-byte payloads, 10 topics, processed over ten days, acked in batches of 500 as a
relay acks them), then:

- Spark start: the JVM and a SparkSession with PostgreSQL's JDBC driver;
- archive with ``--purge``: the freeze, JDBC read + Parquet write, verify (the staging
  read back, then the committed run read back per purge range), the purge of exactly
  the archived rows; seconds and rows/s of each, and end to end (Spark start included)
  against the target of 30 s per million rows (5 minutes for 10,000,000);
- replay of one topic and one day (about ``--rows / 100`` rows) back into the outbox;
- report on the whole archive;
- peak resident memory (high-water mark) of this process (the driver's Python) and of
  the JVM, and the load average, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")

from benchmarks.postgres import ensure_database  # noqa: E402

ensure_database(os.environ.get("EVENTFERRY_BENCH_DB", "eventferry_bench"))

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from eventferry_django.conf import get_settings  # noqa: E402
from eventferry_django.history.archive import ArchiveRequest, archive  # noqa: E402
from eventferry_django.history.jdbc import outbox_source  # noqa: E402
from eventferry_django.history.replay import ReplayRequest, replay  # noqa: E402
from eventferry_django.history.report import ReportRequest, report  # noqa: E402
from eventferry_django.history.session import spark_session  # noqa: E402
from eventferry_django.models import OutboxEvent  # noqa: E402

TOPICS = 10
REPLAY_TOPIC = "shop.topic3"
#: The target: 5 minutes for 10,000,000 rows.
SECONDS_PER_MILLION = 30


def seed(rows: int) -> None:
    """``rows`` done rows, processed 2 to 12 days ago, 500 per ack (one processed_at)."""
    table = OutboxEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {table}")
        cursor.execute("SET synchronous_commit = off")
        cursor.execute(
            f"INSERT INTO {table} (message_id, topic, aggregate_type, aggregate_id, payload, "
            "headers, status, attempts, created_at, processed_at) "
            "SELECT 'bench-' || n, 'shop.topic' || (n %% %s), 'order', 'agg-' || (n %% 5000), "
            "jsonb_build_object('order_id', n, 'customer', 'c-42', 'total', '129.90', "
            "'currency', 'EUR', 'lines', jsonb_build_array(jsonb_build_object('sku', 'A-1', "
            "'qty', 2, 'price', '19.95'), jsonb_build_object('sku', 'B-7', 'qty', 1, "
            "'price', '90.00'))), '{\"x-tenant\": \"t1\"}'::jsonb, 2, n %% 3, "
            "acked - (5 + n %% 400) * interval '1 millisecond', acked "
            "FROM (SELECT n, now() - interval '2 days' - (n / 500) * interval '1 second' "
            "* (10 * 86400 / (%s / 500 + 1)) AS acked FROM generate_series(1, %s) AS n) s",
            [TOPICS, rows, rows],
        )
        cursor.execute("SET synchronous_commit = on")
        cursor.execute(f"VACUUM ANALYZE {table}")


def replay_window() -> tuple[dt.datetime, dt.datetime, int]:
    """One UTC day of the seeded history, and how many rows of ``REPLAY_TOPIC`` it holds."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT MAX(processed_at) FROM {OutboxEvent._meta.db_table}")
        (newest,) = cursor.fetchone()
    since = newest.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    since -= dt.timedelta(days=1)
    until = since + dt.timedelta(days=1)
    rows = OutboxEvent.objects.filter(topic=REPLAY_TOPIC, processed_at__gte=since,
                                      processed_at__lt=until).count()
    return since, until, rows


def python_peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def jvm_peak_rss_mib(spark: Any) -> float:
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(spark: Any) -> tuple[float, float]:
    """CPU time (user + system) the JVM and this process have used so far: unlike wall
    time, it hardly depends on what else the machine runs."""
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    jvm = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    own = resource.getrusage(resource.RUSAGE_SELF)
    return jvm, own.ru_utime + own.ru_stime


def load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--partitions", type=int, default=None,
                        help="Parallel JDBC reads (default: outbox_archive's).")
    parser.add_argument("--archive-only", action="store_true",
                        help="Stop after the archive: no replay, no report.")
    args = parser.parse_args()

    call_command("migrate", "eventferry_django", "zero", verbosity=0)
    call_command("migrate", verbosity=0, run_syncdb=True)
    started = time.monotonic()
    seed(args.rows)
    since, until, replay_rows = replay_window()
    print(f"PostgreSQL {connection.pg_version}, {os.cpu_count()} cores, Spark {args.master}; "
          f"seeded {args.rows:,} done rows in {time.monotonic() - started:.0f} s; "
          f"load average {load()}", flush=True)

    with tempfile.TemporaryDirectory(prefix="eventferry-archive-") as directory:
        path = str(Path(directory) / "archive")
        started = time.monotonic()
        with spark_session(outbox_source(), get_settings().spark, args.master) as spark:
            start_seconds = time.monotonic() - started
            cpu_before = cpu_seconds(spark)
            result = archive(ArchiveRequest(path=path, older_than=dt.timedelta(days=1),
                                            purge=True, partitions=args.partitions),
                             lambda line: print(f"[{time.monotonic() - started:6.1f}s] {line}",
                                                flush=True))
            end_to_end = time.monotonic() - started
            assert result.archived == result.purged == args.rows, result.summary()
            assert not OutboxEvent.objects.exists()
            archive_rss = jvm_peak_rss_mib(spark)
            jvm_cpu, python_cpu = (after - before for after, before
                                   in zip(cpu_seconds(spark), cpu_before, strict=True))
            archive_python_rss = python_peak_rss_mib()
            load_after_archive = load()
            if args.archive_only:
                replayed = figures = None
                replay_seconds = report_seconds = 0.0
                peak_rss = archive_rss
            else:
                started = time.monotonic()
                replayed = replay(ReplayRequest(path=path, topics=[REPLAY_TOPIC], since=since,
                                                until=until))
                replay_seconds = time.monotonic() - started
                assert replayed.inserted == replay_rows, replayed.summary()

                started = time.monotonic()
                figures = report(ReportRequest(out=str(Path(directory) / "report"), path=path))
                report_seconds = time.monotonic() - started
                assert figures.events == args.rows
                peak_rss = jvm_peak_rss_mib(spark)
        OutboxEvent.objects.all().delete()

    n, seconds = args.rows, result.seconds
    target = SECONDS_PER_MILLION * n / 1_000_000
    rows: list[tuple[str, str, str, str]] = [
        ("Spark start (JVM, session, JDBC driver)", f"{start_seconds:.1f} s", "", ""),
        ("archive: freeze (count, id range, checksum in SQL)", f"{seconds['freeze']:.1f} s",
         f"{n / seconds['freeze']:,.0f}", ""),
        ("archive: JDBC read + Parquet write", f"{seconds['read+write']:.1f} s",
         f"{n / seconds['read+write']:,.0f}", ""),
        ("archive: verify (staging, then the committed run per purge range)",
         f"{seconds['verify']:.1f} s", f"{n / seconds['verify']:,.0f}", ""),
        ("archive: purge of the archived rows", f"{seconds['purge']:.1f} s",
         f"{n / seconds['purge']:,.0f}", ""),
        (f"archive end to end, {n:,} rows (Spark start included)", f"{end_to_end:.1f} s",
         f"{n / end_to_end:,.0f}", f"<= {target:.0f} s"),
        ("peak RSS after the archive: JVM / driver's Python",
         f"{archive_rss:,.0f} / {archive_python_rss:,.0f} MiB", "", ""),
        ("CPU time of the archive: JVM / driver's Python (PostgreSQL's not counted)",
         f"{jvm_cpu:.0f} / {python_cpu:.0f} s", "", ""),
        ("load average (1, 5, 15 min) after the archive", load_after_archive, "", ""),
    ]
    if replayed is not None and figures is not None:
        rows += [
            (f"replay of one topic and day ({replayed.inserted:,} rows) into the outbox",
             f"{replay_seconds:.1f} s", f"{replayed.inserted / replay_seconds:,.0f}", ""),
            (f"report on the archive ({figures.events:,} rows)", f"{report_seconds:.1f} s",
             f"{figures.events / report_seconds:,.0f}", ""),
            ("JVM peak RSS over all of it", f"{peak_rss:,.0f} MiB", "", ""),
        ]
    header = ("figure", "value", "rows/s", "target")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |")


if __name__ == "__main__":
    main()
