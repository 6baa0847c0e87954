#!/usr/bin/env python
"""Relay benchmark on PostgreSQL + RabbitMQ (both on loopback). Prints one table.

    make benchmark            # or: python benchmarks/relay.py [--events 20000]
    EVENTFERRY_BENCH_VENDOR=mariadb python benchmarks/relay.py   # the drains on MariaDB

Figures:
- drain: events/s one relay drains from 20,000 pending events over 1 aggregate, 100
  aggregates and 20,000 aggregates, with chains (``MAX_CHAIN``, ``--max-chain``) and,
  once each, heads only (``MAX_CHAIN`` 1, the behaviour before chains; its 1-aggregate
  drain has ``--heads-only-events`` events, as it is slow);
- raw baseline: psycopg ``SKIP LOCKED`` claim of 500, pika persistent messages with
  publisher confirms once per batch, one ``UPDATE ... = ANY`` ack; no ordering rules;
  the drains run ``--repeat`` times, alternating, and the table shows medians;
- CPU per event of the 100-aggregate drain and of the raw baseline, split between the
  PostgreSQL backend, RabbitMQ and this process (read from /proc; Linux, services on
  this machine);
- commit-to-broker latency p50/p99 with an idle relay in another process (woken by NOTIFY);
- publish_event() against a plain ORM insert of a comparable row, each in its own
  transaction.
Each row says which ``synchronous_commit`` it ran under. On MariaDB only the drains run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")

VENDOR = os.environ.get("EVENTFERRY_BENCH_VENDOR", "postgresql")
BENCH_DB = os.environ.get("EVENTFERRY_BENCH_DB", "eventferry_bench")
if VENDOR == "mariadb":
    import pymysql

    with pymysql.connect(host=os.environ.get("MYSQL_HOST", "127.0.0.1"),
                         user=os.environ.get("MYSQL_USER", "root")) as server:
        server.cursor().execute(f"CREATE DATABASE IF NOT EXISTS `{BENCH_DB}` "
                                "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
else:
    from benchmarks.postgres import ensure_database

    ensure_database(BENCH_DB)

import django  # noqa: E402
import psycopg  # noqa: E402

django.setup()

import kombu  # noqa: E402
import pika  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from benchmarks.benchapp.models import PlainEvent  # noqa: E402
from eventferry_django import NewEvent, publish_event, publish_events  # noqa: E402
from eventferry_django.conf import get_settings  # noqa: E402
from eventferry_django.models import OutboxEvent  # noqa: E402
from eventferry_django.relay import Relay, RelayConfig  # noqa: E402
from eventferry_django.store.outbox import OutboxStore  # noqa: E402

PAYLOAD = {"order_id": 0, "customer": "c-42", "total": "129.90", "currency": "EUR",
           "lines": [{"sku": "A-1", "qty": 2, "price": "19.95"},
                     {"sku": "B-7", "qty": 1, "price": "90.00"}]}


def synchronous_commit() -> str:
    if VENDOR == "mariadb":
        return "n/a"
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return str(cursor.fetchone()[0])


# -- broker -----------------------------------------------------------------------------
def reset_queue() -> None:
    with kombu.Connection(settings.AMQP_URL) as conn:
        channel = conn.channel()
        exchange = kombu.Exchange(settings.EXCHANGE, "topic", durable=True)
        queue = kombu.Queue(settings.QUEUE, exchange, routing_key="#", durable=True)
        queue(channel).declare()
        queue(channel).purge()


def queue_depth() -> int:
    with kombu.Connection(settings.AMQP_URL) as conn:
        _, count, _ = conn.channel().queue_declare(settings.QUEUE, passive=True)
        return int(count)


def vacuum() -> None:
    """What autovacuum does for a busy outbox between phases: without it, one phase's dead
    row versions slow the next phase's index scans, which no steady state would show."""
    with connection.cursor() as cursor:
        if VENDOR == "mariadb":
            cursor.execute(f"ANALYZE TABLE {OutboxEvent._meta.db_table}")
            cursor.fetchall()
        else:
            cursor.execute(f"VACUUM ANALYZE {OutboxEvent._meta.db_table}")


# -- CPU accounting ------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process on this machine, or NaN where /proc cannot tell."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def broker_pid() -> int:
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == "beam.smp":
                return int(entry.name)
        except OSError:
            continue
    return -1


class CpuMeter:
    """CPU spent by a database backend, the broker and this process over a block."""

    def __init__(self, backend_pid: int) -> None:
        self.pids = {"database": backend_pid, "broker": broker_pid()}
        self.spent: dict[str, float] = {}

    def __enter__(self) -> CpuMeter:
        self._start = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        self._process = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.spent = {name: cpu_seconds(pid) - self._start[name]
                      for name, pid in self.pids.items()}
        self.spent["relay process"] = time.process_time() - self._process

    def per_event(self, events: int) -> str:
        return " / ".join(f"{seconds / events * 1e6:,.0f}" for seconds in self.spent.values())


CPU_SPLIT = "database / broker / relay process, us"


def backend_pid(conn: Any) -> int:
    """The PostgreSQL backend serving ``conn``; -1 (CPU not measured) on MariaDB, whose
    server is one process for every connection."""
    if VENDOR == "mariadb":
        return -1
    return int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])


# -- the relay ---------------------------------------------------------------------------
def seed(events: int, aggregates: int) -> None:
    OutboxEvent.objects.all().delete()
    for start in range(0, events, 1000):
        with transaction.atomic():
            publish_events([NewEvent("orders.created", {**PAYLOAD, "order_id": n}, "order",
                                     f"order-{n % aggregates}")
                            for n in range(start, min(events, start + 1000))])
    vacuum()


def bench_relay(events: int, aggregates: int, max_chain: int) -> tuple[float, CpuMeter]:
    seed(events, aggregates)
    reset_queue()
    relay = Relay(RelayConfig.from_settings(batch_size=500, until_empty=True),
                  store=OutboxStore(max_chain=max_chain))
    connection.ensure_connection()
    meter = CpuMeter(backend_pid(connection.connection))
    with meter:
        started = time.perf_counter()
        stats = relay.run()
        elapsed = time.perf_counter() - started
    assert stats.published == events, stats
    assert queue_depth() == events, "the broker did not get every event"
    print(f"  drain: {events:,} events, {aggregates:,} aggregates, MAX_CHAIN {max_chain}: "
          f"{events / elapsed:,.0f} events/s", file=sys.stderr, flush=True)
    return events / elapsed, meter


# -- the raw baseline ---------------------------------------------------------------------
class BatchConfirmer:
    """pika with confirms awaited once per batch (its blocking API waits per message)."""

    def __init__(self) -> None:
        url = settings.AMQP_URL
        # kombu writes the default vhost as "//"; pika wants it percent-encoded.
        params = pika.URLParameters(url[:-2] + "/%2F" if url.endswith("//") else url)
        self.connection = pika.BlockingConnection(params)
        self.channel = self.connection.channel()
        self.channel.exchange_declare(settings.EXCHANGE, "topic", durable=True)
        self.impl = self.channel._impl
        self.confirmed = 0
        self.sent = 0
        self.impl.confirm_delivery(self._on_confirm)
        self.connection.process_data_events(time_limit=0.5)

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        assert type(method).__name__ == "Ack", f"broker refused: {method}"
        self.confirmed = method.delivery_tag if method.multiple else max(
            self.confirmed, method.delivery_tag)

    def publish(self, bodies: list[tuple[str, str]]) -> None:
        properties = pika.BasicProperties(delivery_mode=2, content_type="application/json")
        for message_id, body in bodies:
            self.impl.basic_publish(settings.EXCHANGE, "orders.created", body.encode(),
                                    pika.BasicProperties(delivery_mode=2,
                                                         message_id=message_id,
                                                         content_type=properties.content_type))
            self.sent += 1
        while self.confirmed < self.sent:
            self.connection.process_data_events(time_limit=0.01)


def bench_raw(events: int) -> tuple[float, CpuMeter]:
    dsn = connection.get_connection_params()
    with psycopg.connect(host=dsn["host"], port=dsn["port"], user=dsn["user"],
                         dbname=dsn["dbname"], autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS raw_outbox")
        conn.execute("CREATE TABLE raw_outbox (id bigserial PRIMARY KEY, message_id text, "
                     "payload jsonb NOT NULL, status smallint NOT NULL DEFAULT 0)")
        body = json.dumps(PAYLOAD)
        with conn.cursor().copy("COPY raw_outbox (message_id, payload) FROM STDIN") as copy:
            for _ in range(events):
                copy.write_row((str(uuid.uuid4()), body))
        reset_queue()
        confirmer = BatchConfirmer()
        meter = CpuMeter(backend_pid(conn))
        with meter:
            started = time.perf_counter()
            drained = 0
            while True:
                rows = conn.execute(
                    "UPDATE raw_outbox SET status = 1 WHERE id IN (SELECT id FROM raw_outbox "
                    "WHERE status = 0 ORDER BY id LIMIT 500 FOR UPDATE SKIP LOCKED) "
                    "RETURNING id, message_id, payload::text"
                ).fetchall()
                if not rows:
                    break
                confirmer.publish([(m, p) for _, m, p in rows])
                conn.execute("UPDATE raw_outbox SET status = 2 WHERE id = ANY(%s)",
                             [[r[0] for r in rows]])
                drained += len(rows)
            elapsed = time.perf_counter() - started
        confirmer.connection.close()
        conn.execute("DROP TABLE raw_outbox")
    assert drained == events and queue_depth() == events
    return events / elapsed, meter


# -- latency with an idle relay in another process ----------------------------------------
def bench_latency(samples: int) -> tuple[float, float]:
    OutboxEvent.objects.all().delete()
    vacuum()
    reset_queue()
    env = dict(os.environ, PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="benchmarks.settings")
    relay = subprocess.Popen([sys.executable, "-m", "django", "outbox_relay",
                              "--poll-interval", "1", "--batch-size", "100"],
                             env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    committed: dict[str, float] = {}
    arrived: dict[str, float] = {}
    ready = threading.Event()

    def consume() -> None:
        with kombu.Connection(settings.AMQP_URL) as conn:
            queue = kombu.Queue(settings.QUEUE, kombu.Exchange(settings.EXCHANGE, "topic"),
                                routing_key="#", durable=True)

            def on_message(body: Any, message: Any) -> None:
                arrived[message.properties["message_id"]] = time.perf_counter()
                message.ack()

            with conn.Consumer(queue, callbacks=[on_message], accept=["json"]):
                ready.set()
                while len(arrived) < samples:
                    try:
                        conn.drain_events(timeout=5)
                    except TimeoutError:
                        break

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    ready.wait(10)
    time.sleep(2.0)  # the relay is idle and sleeping by now
    try:
        for n in range(samples):
            with transaction.atomic():
                message_id = publish_event("orders.created", {**PAYLOAD, "order_id": n},
                                           aggregate_type="order", aggregate_id=f"o-{n}")
            committed[message_id] = time.perf_counter()
            time.sleep(0.02)
        consumer.join(30)
    finally:
        relay.terminate()
        relay.wait(30)
    latencies = sorted((arrived[m] - committed[m]) * 1000 for m in committed if m in arrived)
    assert len(latencies) == samples, f"{samples - len(latencies)} events did not arrive"
    return statistics.median(latencies), latencies[int(len(latencies) * 0.99) - 1]


# -- publish_event() against a plain insert -----------------------------------------------
def bench_publish_cost(transactions: int, sync: str) -> tuple[float, float]:
    with connection.cursor() as cursor:
        cursor.execute(f"SET synchronous_commit = {sync}")
    outbox, plain = [], []
    for block in range(10):
        started = time.perf_counter()
        for n in range(transactions // 10):
            with transaction.atomic():
                publish_event("orders.created", {**PAYLOAD, "order_id": n},
                              aggregate_type="order", aggregate_id=f"o-{block}-{n}")
        outbox.append(time.perf_counter() - started)
        started = time.perf_counter()
        for n in range(transactions // 10):
            with transaction.atomic():
                PlainEvent.objects.create(
                    message_id=str(uuid.uuid4()), topic="orders.created",
                    aggregate_type="order", aggregate_id=f"o-{block}-{n}",
                    payload={**PAYLOAD, "order_id": n}, headers={},
                )
        plain.append(time.perf_counter() - started)
    with connection.cursor() as cursor:
        cursor.execute("RESET synchronous_commit")
    per = transactions // 10
    return statistics.median(outbox) / per * 1e6, statistics.median(plain) / per * 1e6


def median_run(runs: list[tuple[float, CpuMeter]]) -> tuple[float, CpuMeter]:
    """The run with the median rate (the lower middle one of an even count)."""
    return sorted(runs, key=lambda run: run[0])[(len(runs) - 1) // 2]


def drain_rows(args: argparse.Namespace, sync: str
               ) -> tuple[list[tuple[str, str, str, str]], CpuMeter, CpuMeter | None]:
    """The relay drains: with chains (medians of ``--repeat`` alternating runs) and heads
    only (once each). Returns the rows and the CPU of the 100-aggregate drain and of the
    raw baseline (None on MariaDB, where there is no baseline)."""
    kinds = {"1 aggregate": 1, f"{args.aggregates} aggregates": args.aggregates,
             f"{args.events:,} aggregates": args.events}
    runs: dict[str, list[tuple[float, CpuMeter]]] = {kind: [] for kind in kinds}
    raw_runs = []
    for _ in range(args.repeat):
        for kind, aggregates in kinds.items():
            runs[kind].append(bench_relay(args.events, aggregates, args.max_chain))
        if VENDOR != "mariadb":
            raw_runs.append(bench_raw(args.events))
    rates = {kind: median_run(kind_runs)[0] for kind, kind_runs in runs.items()}
    heads_only = {kind: bench_relay(args.heads_only_events if aggregates == 1 else args.events,
                                    aggregates, 1)[0]
                  for kind, aggregates in kinds.items()}
    one, hundred, every = kinds
    chain = f"MAX_CHAIN {args.max_chain}"
    rows: list[tuple[str, str, str, str]] = []
    for kind in kinds:
        rows.append((f"relay drain, {kind}, {chain} (batch 500)", f"{rates[kind]:,.0f} events/s",
                     sync, ""))
    for kind in kinds:
        events = args.heads_only_events if kinds[kind] == 1 else args.events
        rows.append((f"relay drain, {kind}, heads only (MAX_CHAIN 1, {events:,} events)",
                     f"{heads_only[kind]:,.0f} events/s", sync, ""))
    rows.append((f"1 aggregate / {every}, {chain}", f"{rates[one] / rates[every]:.0%}", sync,
                 ">= 50%"))
    rows.append((f"{every}, {chain} / heads only", f"{rates[every] / heads_only[every]:.0%}",
                 sync, ">= 100% (no worse)"))
    raw_cpu = None
    if raw_runs:
        raw_rate, raw_cpu = median_run(raw_runs)
        rows.append(("raw baseline (claim 500, pika confirms/batch)",
                     f"{raw_rate:,.0f} events/s", sync, ""))
        rows.append((f"relay / raw, {hundred}, {chain}", f"{rates[hundred] / raw_rate:.0%}",
                     sync, ">= 70%"))
        rows.append((f"relay / raw, {every}, {chain}", f"{rates[every] / raw_rate:.0%}", sync,
                     ""))
    return rows, median_run(runs[hundred])[1], raw_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--aggregates", type=int, default=100)
    parser.add_argument("--max-chain", type=int, default=get_settings().max_chain,
                        help="MAX_CHAIN of the chained drains (default: the setting's)")
    parser.add_argument("--heads-only-events", type=int, default=1000,
                        help="events of the heads-only 1-aggregate drain (about 60/s)")
    parser.add_argument("--drains-only", action="store_true",
                        help="skip the latency and publish_event() figures")
    parser.add_argument("--latency-samples", type=int, default=300)
    parser.add_argument("--publish-transactions", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3,
                        help="drains of each kind, alternating; the table shows medians")
    args = parser.parse_args()

    # A fresh outbox table each run, so its DDL is this version's.
    call_command("migrate", "eventferry_django", "zero", verbosity=0)
    call_command("migrate", verbosity=0, run_syncdb=True)
    PlainEvent.objects.all().delete()
    sync = synchronous_commit()
    server = (f"MariaDB {connection.mysql_version}" if VENDOR == "mariadb"
              else f"PostgreSQL {connection.pg_version}")
    print(f"{server}, RabbitMQ at {settings.AMQP_URL}, {os.cpu_count()} cores; "
          f"{args.events:,} events; drains: medians of {args.repeat} runs")

    rows, relay_cpu, raw_cpu = drain_rows(args, sync)
    if raw_cpu is not None and not args.drains_only:
        p50, p99 = bench_latency(args.latency_samples)
        durable = bench_publish_cost(args.publish_transactions, "on")
        fast = bench_publish_cost(args.publish_transactions, "off")
        rows += [
            (f"CPU per event, relay, {args.aggregates} aggregates ({CPU_SPLIT})",
             relay_cpu.per_event(args.events), sync, ""),
            (f"CPU per event, raw baseline ({CPU_SPLIT})", raw_cpu.per_event(args.events),
             sync, ""),
            ("commit-to-broker latency p50", f"{p50:.1f} ms", sync, "<= 5 ms"),
            ("commit-to-broker latency p99", f"{p99:.1f} ms", sync, "<= 50 ms"),
            ("publish_event() transaction", f"{durable[0]:,.0f} us", "on", ""),
            ("plain ORM insert transaction", f"{durable[1]:,.0f} us", "on", ""),
            ("publish_event / plain insert", f"{durable[0] / durable[1]:.2f}x", "on", "<= 1.1x"),
            ("publish_event() transaction", f"{fast[0]:,.0f} us", "off", ""),
            ("plain ORM insert transaction", f"{fast[1]:,.0f} us", "off", ""),
            ("publish_event / plain insert", f"{fast[0] / fast[1]:.2f}x", "off", ""),
        ]
    OutboxEvent.objects.all().delete()
    PlainEvent.objects.all().delete()

    header = ("figure", "value", "synchronous_commit", "target")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print("| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |")


if __name__ == "__main__":
    main()
