#!/usr/bin/env python
"""Replay order benchmark: archived events replayed through real relays to a RabbitMQ
consumer that checks every aggregate's order. Prints one table.

    python benchmarks/replay_order.py [--events 1000000] [--aggregates 1000] [--relays 2]

On PostgreSQL (database ``eventferry_replay_bench``) and RabbitMQ, both on loopback:

1. seeds ``--events`` done rows, ``--aggregates`` aggregates, each event's payload
   carrying its aggregate and its sequence number within it (increasing with the id);
2. archives them with ``--purge`` (Spark ``local[2]``), so the outbox is empty;
3. replays the whole archive into the outbox (``outbox_replay``'s code path);
4. drains the copies with ``--relays`` ``outbox_relay`` processes into a durable queue
   bound to the ``replay.order.#`` topics, read by one consumer process
   (``benchmarks/soak_consumer.py``) that writes every delivery down in arrival order;
5. checks at the consumer: every copy arrived, none twice, and within each aggregate
   the sequence numbers arrive in increasing order (a violation is any that does not).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATABASE = "eventferry_replay_bench"
os.environ["EVENTFERRY_BENCH_DB"] = DATABASE
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")

from benchmarks.postgres import ensure_database  # noqa: E402

ensure_database(DATABASE)

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from eventferry_django.conf import get_settings  # noqa: E402
from eventferry_django.history.archive import ArchiveRequest, archive  # noqa: E402
from eventferry_django.history.jdbc import outbox_source  # noqa: E402
from eventferry_django.history.replay import ReplayRequest, replay  # noqa: E402
from eventferry_django.history.session import spark_session  # noqa: E402
from eventferry_django.models import OutboxEvent  # noqa: E402

QUEUE = "eventferry_replay_order"
TOPIC_PATTERN = "replay.order.#"


def seed(events: int, aggregates: int) -> None:
    """Event n belongs to aggregate n % aggregates with sequence number n // aggregates."""
    table = OutboxEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {table}")
        cursor.execute(
            f"INSERT INTO {table} (message_id, topic, aggregate_type, aggregate_id, payload, "
            "headers, status, attempts, created_at, processed_at) "
            "SELECT 'orig-' || n, 'replay.order.' || (n %% %s %% 4), 'account', "
            "'acc-' || (n %% %s), jsonb_build_object('account', 'acc-' || (n %% %s), "
            "'seq', n / %s, 'amount', '12.50'), '{}'::jsonb, 2, 0, "
            "now() - interval '3 days', now() - interval '2 days' "
            "+ n * interval '1 microsecond' FROM generate_series(0, %s - 1) AS n",
            [aggregates, aggregates, aggregates, aggregates, events],
        )
        cursor.execute(f"VACUUM ANALYZE {table}")


def declare_queue() -> None:
    import kombu

    from benchmarks.settings import AMQP_URL, EXCHANGE

    with kombu.Connection(AMQP_URL) as conn:
        exchange = kombu.Exchange(EXCHANGE, "topic", durable=True)
        queue = kombu.Queue(QUEUE, exchange, routing_key=TOPIC_PATTERN, durable=True)
        queue(conn.channel()).declare()
        queue(conn.channel()).purge()


def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), EVENTFERRY_BENCH_DB=DATABASE,
               DJANGO_SETTINGS_MODULE="benchmarks.settings")
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, *args], env=env, cwd=ROOT, stdout=out,
                                stderr=subprocess.STDOUT)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def check(deliveries: Path, expected: int) -> tuple[int, int, int, int]:
    """Deliveries, duplicates, copies missing and order violations, from the consumer's
    record: a violation is a sequence number not above its aggregate's previous one."""
    last: dict[str, int] = {}
    seen: Counter[str] = Counter()
    violations = 0
    for line in deliveries.read_text().splitlines():
        message_id, aggregate, seq, _redelivered, _at = line.split()
        seen[message_id] += 1
        if seen[message_id] > 1:
            continue
        if int(seq) <= last.get(aggregate, -1):
            violations += 1
        last[aggregate] = int(seq)
    duplicates = sum(n - 1 for n in seen.values())
    return sum(seen.values()), duplicates, expected - len(seen), violations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--aggregates", type=int, default=1000)
    parser.add_argument("--relays", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args()
    # Stopped with SIGTERM, it still stops its relays and consumer.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))

    call_command("migrate", "eventferry_django", "zero", verbosity=0)
    call_command("migrate", verbosity=0, run_syncdb=True)
    declare_queue()
    figures: list[tuple[str, str]] = []
    started = time.monotonic()
    seed(args.events, args.aggregates)
    figures.append((f"seed {args.events:,} done rows, {args.aggregates:,} aggregates",
                    f"{time.monotonic() - started:.0f} s"))

    with tempfile.TemporaryDirectory(prefix="eventferry-replay-") as directory:
        path = str(Path(directory) / "archive")
        with spark_session(outbox_source(), get_settings().spark, "local[2]"):
            started = time.monotonic()
            archived = archive(ArchiveRequest(path=path, older_than=dt.timedelta(days=1),
                                              purge=True))
            assert archived.archived == archived.purged == args.events, archived.summary()
            figures.append(("archive with --purge", f"{time.monotonic() - started:.0f} s"))
            started = time.monotonic()
            replayed = replay(ReplayRequest(path=path))
            seconds = time.monotonic() - started
            assert replayed.inserted == args.events, replayed.summary()
            figures.append((f"replay of {replayed.inserted:,} archived events into the outbox",
                            f"{seconds:.0f} s ({replayed.inserted / seconds:,.0f}/s)"))
        # The planner has not seen the replayed rows yet, and a relay's first claim would
        # plan for an empty outbox; a relay runs this itself once a claim shows it.
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {OutboxEvent._meta.db_table}")

        logs = Path(directory)
        deliveries = logs / "deliveries.txt"
        consumer = start(["-m", "benchmarks.soak_consumer", "--url", settings.AMQP_URL,
                          "--queue", QUEUE, "--out", str(deliveries)], logs / "consumer.log")
        started = time.monotonic()
        relays = [start(["-m", "django", "outbox_relay", "--relay-id", f"replay-{n}",
                         "--poll-interval", "0.2"], logs / f"relay-{n}.log")
                  for n in range(args.relays)]
        try:
            while OutboxEvent.objects.open().exists():
                if time.monotonic() - started > args.timeout:
                    raise SystemExit(f"the relays did not drain the outbox in {args.timeout} s")
                if any(r.poll() is not None for r in relays):
                    raise SystemExit("a relay exited: " + (logs / "relay-0.log").read_text())
                time.sleep(1)
            drained = time.monotonic() - started
            while (deliveries.exists() and
                   deliveries.read_text().count("\n") < args.events
                   and time.monotonic() - started < args.timeout):
                time.sleep(1)
        finally:
            for process in [*relays, consumer]:
                stop(process)
        figures.append((f"{args.relays} relays drain the copies to RabbitMQ",
                        f"{drained:.0f} s ({args.events / drained:,.0f}/s)"))
        delivered, duplicates, missing, violations = check(deliveries, args.events)
    OutboxEvent.objects.all().delete()

    figures += [("deliveries at the consumer", f"{delivered:,}"),
                ("duplicates / missing", f"{duplicates:,} / {missing:,}"),
                ("per-aggregate order violations at the consumer", f"{violations:,}"),
                ("load average (1, 5, 15 min) at the end",
                 " ".join(f"{v:.1f}" for v in os.getloadavg()))]
    width = max(len(name) for name, _ in figures)
    value_width = max(len(value) for _, value in figures)
    print(f"| {'figure'.ljust(width)} | {'value'.ljust(value_width)} |")
    print(f"| {'-' * width} | {'-' * value_width} |")
    for name, value in figures:
        print(f"| {name.ljust(width)} | {value.ljust(value_width)} |")
    if violations or missing or duplicates:
        raise SystemExit("order or delivery check failed")


if __name__ == "__main__":
    main()
