#!/usr/bin/env python
"""History pipeline benchmark on PostgreSQL with Spark in local mode. Prints one table.

    python benchmarks/archive.py [--rows 1000000] [--master local[2]]

Seeds ``--rows`` done rows (about 200-byte payloads, 10 topics, processed over ten days,
acked in batches of 500 as a relay acks them), then:

- Spark start: the JVM and a SparkSession with PostgreSQL's JDBC driver;
- archive: the freeze, JDBC read + Parquet write, verify (the staging and the committed
  run read back), purge of exactly the archived rows: seconds and rows/s of each, and
  end to end (Spark start included) against the 120 s target;
- replay of one topic (``--rows / 10`` rows) back into the outbox;
- report on the whole archive;
- the JVM's peak resident memory (VmHWM) over all of it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
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


def seed(rows: int) -> None:
    """``rows`` done rows, processed 2 to 12 days ago, 500 per ack (one processed_at)."""
    table = OutboxEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {table}")
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
        cursor.execute(f"VACUUM ANALYZE {table}")


def jvm_peak_rss_mib(spark: Any) -> float:
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    call_command("migrate", "eventferry_django", "zero", verbosity=0)
    call_command("migrate", verbosity=0, run_syncdb=True)
    started = time.monotonic()
    seed(args.rows)
    print(f"PostgreSQL {connection.pg_version}, {os.cpu_count()} cores, Spark {args.master}; "
          f"seeded {args.rows:,} done rows in {time.monotonic() - started:.0f} s")

    rows: list[tuple[str, str, str, str]] = []
    with tempfile.TemporaryDirectory(prefix="eventferry-archive-") as directory:
        path = str(Path(directory) / "archive")
        started = time.monotonic()
        with spark_session(outbox_source(), get_settings().spark, args.master) as spark:
            start_seconds = time.monotonic() - started
            result = archive(ArchiveRequest(path=path, older_than=dt.timedelta(days=1),
                                            purge=True))
            end_to_end = time.monotonic() - started
            assert result.archived == result.purged == args.rows, result.summary()
            assert not OutboxEvent.objects.exists()
            archive_rss = jvm_peak_rss_mib(spark)

            started = time.monotonic()
            replayed = replay(ReplayRequest(path=path, topics=["shop.topic3"]))
            replay_seconds = time.monotonic() - started
            assert replayed.inserted == args.rows // TOPICS, replayed.summary()

            started = time.monotonic()
            figures = report(ReportRequest(out=str(Path(directory) / "report"), path=path))
            report_seconds = time.monotonic() - started
            assert figures.events == args.rows
            peak_rss = jvm_peak_rss_mib(spark)
        OutboxEvent.objects.all().delete()

    n = args.rows
    rows += [
        ("Spark start (JVM, session, JDBC driver)", f"{start_seconds:.1f} s", "", ""),
        ("archive: freeze + JDBC read + Parquet write", f"{result.seconds['read+write']:.1f} s",
         f"{n / result.seconds['read+write']:,.0f}", ""),
        ("archive: verify (staging and committed run read back)",
         f"{result.seconds['verify']:.1f} s", f"{n / result.seconds['verify']:,.0f}", ""),
        ("archive: purge of the archived rows", f"{result.seconds['purge']:.1f} s",
         f"{n / result.seconds['purge']:,.0f}", ""),
        (f"archive end to end, {n:,} rows (Spark start included)", f"{end_to_end:.1f} s",
         f"{n / end_to_end:,.0f}", "<= 120 s"),
        ("JVM peak RSS after the archive", f"{archive_rss:,.0f} MiB", "", ""),
        (f"replay of one topic ({replayed.inserted:,} rows) into the outbox",
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
