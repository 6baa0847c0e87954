#!/usr/bin/env python
"""Relay benchmark on PostgreSQL + RabbitMQ (both on loopback). Prints tables.

    make benchmark            # or: python benchmarks/relay.py [--events 20000]
    EVENTFERRY_BENCH_VENDOR=mariadb python benchmarks/relay.py   # the drains on MariaDB

Figures:
- drains: 20,000 pending events over 1 aggregate, 100 aggregates and 20,000
  aggregates, each drained by the raw limit (:mod:`benchmarks.raw_limit`, the ceiling)
  and by a relay process (:mod:`benchmarks.relay_drain`) with the defaults and with
  ``BATCH_SIZE`` 500; end to end (start-up included) and steady state (after the
  relay's first settlement); ``--repeat`` interleaved rounds, medians shown;
- CPU per event of the relay process against the raw limit's;
- poison isolation: 100 aggregates, one whose head the publisher refuses until it is
  dead, against the same drain without poison;
- commit-to-broker latency p50/p99 with an idle relay in another process (woken by NOTIFY);
- publish_event() against a plain ORM insert of a comparable row, each in its own
  transaction.
On MariaDB only the drains run.

``--redis`` runs only the Redis drains instead: at ``--aggregates`` aggregates, the raw
limit with redis-py (:class:`benchmarks.raw_limit.RedisPipeliner`, one pipeline a batch)
beside a relay process publishing to Redis (KombuPublisher: one pipeline a batch), the
same relay through kombu's Producer as before (two round trips a message) and the relay
on RabbitMQ (issue 28's target: the relay on Redis at least 60% of the raw loop, steady).
Both broker runs add the raw loop paying the store contract's one write per event on the
outbox table (:func:`benchmarks.raw_limit.drain_outbox`): the floor of this relay, which
the ratios are also given against.

``--kafka`` runs only the Kafka drains: a Tansu broker (:mod:`benchmarks.tansu`, memory
storage) started on a free port for the run, then at ``--aggregates`` aggregates the raw
limit with confluent-kafka (:class:`benchmarks.raw_limit.KafkaProducer`: 500 rows claimed
``FOR UPDATE SKIP LOCKED``, produced keyed by aggregate with an idempotent ``acks=all``
producer, flushed once, marked done, committed) beside a relay process publishing with
KafkaPublisher, each to a fresh topic of :data:`KAFKA_PARTITIONS` partitions on the same
seeded rows (issue 28's target: the relay at least 70% of the raw loop, steady).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
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
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from benchmarks import raw_limit, tansu  # noqa: E402
from benchmarks.benchapp.models import PlainEvent  # noqa: E402
from benchmarks.raw_limit import DrainTime  # noqa: E402
from benchmarks.relay_drain import (  # noqa: E402
    PAYLOAD,
    poison_drain,
    relay_drain,
    seed,
    table,
    vacuum,
)
from eventferry_django import publish_event  # noqa: E402
from eventferry_django.models import OutboxEvent  # noqa: E402

#: The relays each drain runs, by name: ``outbox_relay`` options and environment.
RELAYS: dict[str, tuple[list[str], dict[str, str]]] = {
    "defaults (BATCH_SIZE 500, MAX_CHAIN 500)": ([], {}),
    "BATCH_SIZE 100, MAX_CHAIN 100 (the defaults before)": (
        ["--batch-size", "100"], {"EVENTFERRY_BENCH_MAX_CHAIN": "100"}),
}


def synchronous_commit() -> str:
    """The relay's and the raw limit's durability setting, in words."""
    if VENDOR == "mariadb":
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@innodb_flush_log_at_trx_commit")
            return f"n/a (innodb_flush_log_at_trx_commit={cursor.fetchone()[0]})"
    return "off"


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


# -- the drains ----------------------------------------------------------------------------
#: The raw limit's two tables: the issue's ceiling, a copy of the seeded rows in a table
#: with a primary key only (its updates are HOT), and the outbox table itself.
BARE_TABLE = "raw_outbox"
RAW = {"raw limit": BARE_TABLE, "raw, outbox table": None}


def raw_connection() -> Any:
    params = connection.get_connection_params()
    if VENDOR == "mariadb":
        import pymysql

        return pymysql.connect(host=params["host"], port=params.get("port", 3306),
                               user=params["user"], database=params["database"])
    return psycopg.connect(host=params["host"], port=params["port"], user=params["user"],
                           dbname=params["dbname"], autocommit=True)


def copy_to_bare_table(keyed: bool = False) -> None:
    """The seeded rows and payloads (and, if ``keyed``, their aggregate ids), in a table
    of their own with only a primary key."""
    key = "aggregate_id, " if keyed else ""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {BARE_TABLE}")
        cursor.execute(f"CREATE TABLE {BARE_TABLE} AS SELECT id, {key}payload, status, "
                       f"processed_at FROM {table()}")
        cursor.execute(f"ALTER TABLE {BARE_TABLE} ADD PRIMARY KEY (id)")
        if VENDOR != "mariadb":
            cursor.execute(f"VACUUM ANALYZE {BARE_TABLE}")


def raw_drain(events: int, on: str, redis: bool = False, kafka: tuple[str, str] | None = None,
              *, outbox: bool = False) -> tuple[DrainTime, float]:
    """Drain table ``on`` with the raw limit (``outbox``: its variant on the outbox table,
    :func:`benchmarks.raw_limit.drain_outbox`), in this (warm) process, to RabbitMQ,
    ``redis`` or ``kafka`` (its bootstrap servers and topic); its times and CPU seconds."""
    raw = raw_connection()
    confirmer: raw_limit.BatchConfirmer | raw_limit.RedisPipeliner | raw_limit.KafkaProducer = (
        raw_limit.KafkaProducer(*kafka) if kafka
        else raw_limit.RedisPipeliner(settings.REDIS_URL, settings.QUEUE) if redis
        else raw_limit.BatchConfirmer(settings.AMQP_URL, settings.EXCHANGE))
    cpu = time.process_time()
    try:
        drained = (raw_limit.drain_outbox(raw, on, confirmer) if outbox
                   else raw_limit.drain(raw, on, connection.vendor, confirmer))
    finally:
        cpu = time.process_time() - cpu
        confirmer.close()
        raw.close()
    assert drained.events == events
    return drained, cpu


def checked(events: int, drainer: str, aggregates: int, drained: tuple[DrainTime, float]
            ) -> tuple[DrainTime, float]:
    assert queue_depth() == events, "the broker did not get every event"
    print(f"  {aggregates:,} aggregate(s), {drainer}: {drained[0].steady_rate:,.0f} events/s "
          f"steady, {drained[0].rate:,.0f} end to end", file=sys.stderr, flush=True)
    return drained


Round = dict[str, tuple[DrainTime, float]]


def drain_round(events: int, aggregates: int) -> Round:
    """Every drain of one aggregate count once: the raw limit on both tables, then each
    relay, each on a freshly seeded outbox."""
    drained = {}
    seed(events, aggregates)
    copy_to_bare_table()
    for drainer, on in RAW.items():
        reset_queue()
        drained[drainer] = checked(events, drainer, aggregates,
                                   raw_drain(events, on or table()))
    for drainer, (options, env) in RELAYS.items():
        seed(events, aggregates)
        reset_queue()
        drained[drainer] = checked(events, drainer, aggregates,
                                   relay_drain(events, options, env))
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {BARE_TABLE}")
    return drained


# -- Redis ----------------------------------------------------------------------------------
#: The relays of the Redis drains, by name: ``EVENTFERRY_BENCH_BROKER`` (benchmarks.settings).
REDIS_RELAYS = {
    "relay, Redis (one pipeline a batch)": "redis",
    "relay, Redis via kombu's Producer (before)": "redis-producer",
    "relay, RabbitMQ": "amqp",
}
REDIS_RAW = "raw limit, psycopg + redis-py pipeline"
REDIS_OUTBOX = "raw, on the outbox table (the contract's one write)"


def reset_redis_queue() -> Any:
    """The queue, bound on Redis as a kombu consumer binds it (so the relay routes to it),
    empty; returns a redis-py client on it."""
    with kombu.Connection(settings.REDIS_URL) as conn:
        exchange = kombu.Exchange(settings.EXCHANGE, "topic", durable=True)
        queue = kombu.Queue(settings.QUEUE, exchange, routing_key="#", durable=True)
        queue(conn.channel()).declare()
        queue(conn.channel()).purge()
    import redis

    return redis.Redis.from_url(settings.REDIS_URL)


def redis_round(events: int, aggregates: int) -> dict[str, DrainTime]:
    """The raw redis-py loop, then each relay of :data:`REDIS_RELAYS`, each on a freshly
    seeded outbox; each checked to have left every event in its queue."""
    drained = {}
    seed(events, aggregates)
    copy_to_bare_table()
    client = reset_redis_queue()
    drained[REDIS_RAW] = raw_drain(events, BARE_TABLE, redis=True)[0]
    assert client.llen(settings.QUEUE) == events, "Redis did not get every event"
    client = reset_redis_queue()
    drained[REDIS_OUTBOX] = raw_drain(events, table(), redis=True, outbox=True)[0]
    assert client.llen(settings.QUEUE) == events, "Redis did not get every event"
    for name, broker in REDIS_RELAYS.items():
        seed(events, aggregates)
        client = reset_redis_queue()
        reset_queue()
        drained[name] = relay_drain(events, [], {"EVENTFERRY_BENCH_BROKER": broker})[0]
        depth = queue_depth() if broker == "amqp" else client.llen(settings.QUEUE)
        assert depth == events, f"{name}: the broker got {depth} of {events} events"
    for name, times in drained.items():
        print(f"  {name}: {times.steady_rate:,.0f} events/s steady, {times.rate:,.0f} end "
              "to end", file=sys.stderr, flush=True)
    client.delete(settings.QUEUE)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {BARE_TABLE}")
    return drained


def redis_table(args: argparse.Namespace) -> list[str]:
    rounds = [redis_round(args.events, args.aggregates) for _ in range(args.repeat)]
    lines = [
        f"Redis drains of {args.events:,} events over {args.aggregates} aggregates, "
        f"events/s, medians of {args.repeat} round(s); defaults (BATCH_SIZE 500), "
        "synchronous_commit off:", "",
    ]
    return lines + ratio_table(rounds, [REDIS_RAW, REDIS_OUTBOX, *REDIS_RELAYS], "redis-py")


# -- Kafka ----------------------------------------------------------------------------------
KAFKA_RAW = "raw limit, psycopg + confluent-kafka"
KAFKA_OUTBOX = "raw, on the outbox table (the contract's one write)"
KAFKA_RELAY = "relay, KafkaPublisher"
#: The partitions of each drain's topic.
KAFKA_PARTITIONS = 4


def kafka_round(events: int, aggregates: int, servers: str) -> dict[str, DrainTime]:
    """The raw confluent-kafka loop, then the relay, each on a freshly seeded outbox and
    a topic of its own; each checked to have left every event in its topic."""
    drained = {}
    seed(events, aggregates)
    copy_to_bare_table(keyed=True)
    topic = tansu.create_topic(servers, f"bench-raw-{uuid.uuid4().hex[:8]}", KAFKA_PARTITIONS)
    drained[KAFKA_RAW] = raw_drain(events, BARE_TABLE, kafka=(servers, topic))[0]
    assert tansu.records_in(servers, topic) == events, "Kafka did not get every event"
    tansu.delete_topic(servers, topic)
    topic = tansu.create_topic(servers, f"bench-outbox-{uuid.uuid4().hex[:8]}",
                               KAFKA_PARTITIONS)
    drained[KAFKA_OUTBOX] = raw_drain(events, table(), kafka=(servers, topic), outbox=True)[0]
    assert tansu.records_in(servers, topic) == events, "Kafka did not get every event"
    tansu.delete_topic(servers, topic)
    seed(events, aggregates)
    topic = tansu.create_topic(servers, f"bench-relay-{uuid.uuid4().hex[:8]}",
                               KAFKA_PARTITIONS)
    drained[KAFKA_RELAY] = relay_drain(events, [], {
        "EVENTFERRY_BENCH_BROKER": "kafka", "EVENTFERRY_BENCH_KAFKA": servers,
        "EVENTFERRY_BENCH_QUEUE": topic})[0]
    assert tansu.records_in(servers, topic) == events, "the relay's topic lacks events"
    tansu.delete_topic(servers, topic)
    for name, times in drained.items():
        print(f"  {name}: {times.steady_rate:,.0f} events/s steady, {times.rate:,.0f} end "
              "to end", file=sys.stderr, flush=True)
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {BARE_TABLE}")
    return drained


def kafka_table(args: argparse.Namespace) -> list[str]:
    with tempfile.TemporaryDirectory() as directory, \
            tansu.Tansu(Path(directory) / "tansu.log") as broker:
        rounds = [kafka_round(args.events, args.aggregates, broker.bootstrap)
                  for _ in range(args.repeat)]
    lines = [
        f"Kafka drains of {args.events:,} events over {args.aggregates} aggregates to Tansu "
        f"(memory storage, topics of {KAFKA_PARTITIONS} partitions), events/s, medians of "
        f"{args.repeat} round(s); defaults (BATCH_SIZE 500), synchronous_commit off:", "",
    ]
    return lines + ratio_table(rounds, [KAFKA_RAW, KAFKA_OUTBOX, KAFKA_RELAY],
                               "confluent-kafka")


def ratio_table(rounds: list[dict[str, DrainTime]], names: list[str], client: str
                ) -> list[str]:
    """Each drain's median rates, as a share of the raw loop (the first of ``names``)
    and of the raw loop on the outbox table (the second), per round then the median."""
    raw, outbox = names[:2]
    lines = [f"| drain | steady | end to end | steady / raw {client} loop | steady / raw "
             "loop on the outbox |", "|---|---|---|---|---|"]
    for name in names:
        share = [median([r[name].steady_rate / r[base].steady_rate for r in rounds])
                 for base in (raw, outbox)]
        lines.append(f"| {name} | {median([r[name].steady_rate for r in rounds]):,.0f} | "
                     f"{median([r[name].rate for r in rounds]):,.0f} | {share[0]:.0%} | "
                     f"{share[1]:.0%} |")
    return lines


def median(values: list[float]) -> float:
    return statistics.median(values)


def drain_tables(args: argparse.Namespace, sync: str) -> list[str]:
    """The drains, ``--repeat`` rounds, each round every drain once in turn."""
    kinds = {"1": 1, f"{args.aggregates:,}": args.aggregates, f"{args.events:,}": args.events}
    runs: dict[str, list[Round]] = {kind: [] for kind in kinds}
    for _ in range(args.repeat):
        for kind, aggregates in kinds.items():
            runs[kind].append(drain_round(args.events, aggregates))
    drainers = [*RAW, *RELAYS]
    lines = ["| aggregates | " + " | ".join(RAW) + " | " + " | ".join(
        f"eventferry, {name}: steady / end to end | steady / raw limit" for name in RELAYS)
        + " |", "|---|" + "---|" * len(RAW) + "---|---|" * len(RELAYS)]
    cpu = ["| aggregates | " + " | ".join(drainers) + " |", "|---|" + "---|" * len(drainers)]
    for kind, rounds in runs.items():
        def rates(drainer: str, steady: bool = True, rounds: list[Round] = rounds
                  ) -> list[float]:
            return [r[drainer][0].steady_rate if steady else r[drainer][0].rate for r in rounds]

        cells = [kind, *(f"{median(rates(drainer)):,.0f}" for drainer in RAW)]
        for name in RELAYS:
            # Each round's ratio, then their median: rounds ran minutes apart on a
            # machine whose load drifts, a drain and its raw limit seconds apart.
            ratio = median([relay / raw for relay, raw
                            in zip(rates(name), rates("raw limit"), strict=True)])
            cells += [f"{median(rates(name)):,.0f} / {median(rates(name, False)):,.0f}",
                      f"{ratio:.0%}"]
        lines.append("| " + " | ".join(cells) + " |")
        cpu.append("| " + " | ".join([kind, *(
            f"{median([r[d][1] / r[d][0].events * 1e6 for r in rounds]):,.0f}"
            for d in drainers)]) + " |")
    return [f"Drains of {args.events:,} events, events/s, medians of {args.repeat} "
            f"interleaved rounds; synchronous_commit {sync} for the relay and the raw limit:",
            "", *lines, "", "CPU per event of the draining process (the relay's includes "
            "its start-up), us:", "", *cpu]


def poison_table(args: argparse.Namespace) -> list[str]:
    """Healthy aggregates with and without one poisoned aggregate, interleaved rounds."""
    runs: dict[bool, list[Any]] = {False: [], True: []}
    for _ in range(args.repeat):
        for poisoned in (False, True):
            seed(args.events, args.aggregates)
            reset_queue()
            runs[poisoned].append(poison_drain(args.events, poisoned=poisoned))
            print(f"  poison {poisoned}: {runs[poisoned][-1]}", file=sys.stderr, flush=True)
    rate = {p: median([r.healthy.steady_rate for r in runs[p]]) for p in runs}
    p99 = {p: median([r.p99 for r in runs[p]]) for p in runs}
    settled = all(r.settled for r in runs[True])
    overtook = "/".join(str(r.overtook) for r in runs[True])
    behind = args.events // args.aggregates - 1
    return [
        f"Poison isolation: {args.events:,} events over {args.aggregates} aggregates, "
        "defaults; one aggregate's head refused until dead (MAX_ATTEMPTS 5, BACKOFF BASE "
        f"0.25 s) against the same drain without poison; medians of {args.repeat} "
        "interleaved rounds:",
        "", "| figure | without poison | with poison | ratio | target |", "|---|---|---|---|---|",
        f"| healthy aggregates, steady events/s | {rate[False]:,.0f} | {rate[True]:,.0f} | "
        f"{rate[True] / rate[False]:.0%} | >= 90% |",
        f"| healthy aggregates, p99 seconds from first progress to done | {p99[False]:.2f} | "
        f"{p99[True]:.2f} | {p99[True] / p99[False]:.0%} | <= 110% |",
        f"| poisoned aggregate: head dead, its {behind} later events done | | "
        f"{'yes' if settled else 'NO'} | | yes |",
        f"| later events done before the head was dead (each round) | | {overtook} | | "
        "the first chain only |",
    ]


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--aggregates", type=int, default=100)
    parser.add_argument("--drains-only", action="store_true",
                        help="skip the poison, latency and publish_event() figures")
    parser.add_argument("--latency-samples", type=int, default=300)
    parser.add_argument("--publish-transactions", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds of every drain, interleaved; the tables show medians")
    parser.add_argument("--redis", action="store_true",
                        help="only the Redis drains (PostgreSQL), at --aggregates aggregates")
    parser.add_argument("--kafka", action="store_true",
                        help="only the Kafka drains (PostgreSQL; a Tansu broker started for "
                             "them), at --aggregates aggregates")
    args = parser.parse_args()

    # A fresh outbox table each run, so its DDL is this version's.
    call_command("migrate", "eventferry_django", "zero", verbosity=0)
    call_command("migrate", verbosity=0, run_syncdb=True)
    PlainEvent.objects.all().delete()
    sync = synchronous_commit()
    server = (f"MariaDB {'.'.join(map(str, connection.mysql_version))}" if VENDOR == "mariadb"
              else f"PostgreSQL {connection.pg_version}")
    print(f"{server}, RabbitMQ at {settings.AMQP_URL}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} at the start\n")

    only = args.redis or args.kafka
    lines = (redis_table(args) if args.redis else kafka_table(args) if args.kafka
             else drain_tables(args, sync))
    if not args.drains_only and not only:
        lines += ["", *poison_table(args)]
    if VENDOR != "mariadb" and not args.drains_only and not only:
        p50, p99 = bench_latency(args.latency_samples)
        durable = bench_publish_cost(args.publish_transactions, "on")
        fast = bench_publish_cost(args.publish_transactions, "off")
        rows = [
            ("commit-to-broker latency p50", f"{p50:.1f} ms", "on", "<= 5 ms"),
            ("commit-to-broker latency p99", f"{p99:.1f} ms", "on", "<= 50 ms"),
            ("publish_event() transaction", f"{durable[0]:,.0f} us", "on", ""),
            ("plain ORM insert transaction", f"{durable[1]:,.0f} us", "on", ""),
            ("publish_event / plain insert", f"{durable[0] / durable[1]:.2f}x", "on", "<= 1.1x"),
            ("publish_event() transaction", f"{fast[0]:,.0f} us", "off", ""),
            ("plain ORM insert transaction", f"{fast[1]:,.0f} us", "off", ""),
            ("publish_event / plain insert", f"{fast[0] / fast[1]:.2f}x", "off", ""),
        ]
        lines += ["", "| figure | value | synchronous_commit | target |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    OutboxEvent.objects.all().delete()
    PlainEvent.objects.all().delete()
    print(f"load average {os.getloadavg()[0]:.1f} at the end\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
