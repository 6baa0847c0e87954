#!/usr/bin/env python
"""The relay and publish_event on the local T-SQL endpoint (Babelfish for PostgreSQL) and
RabbitMQ. Prints one table, labelled Babelfish: the endpoint is NOT SQL Server (its
locking, plans and storage are PostgreSQL's), so no figure here says anything about SQL
Server; it tells whether our T-SQL path has a cost out of proportion, per driver.

    flock -x /tmp/ef-cpu.lock .venv/bin/python benchmarks/tds_endpoint.py [--events 2000]

Needs the mssql extra and the endpoint (scripts/ensure-tds-endpoint.sh prints its URL;
EVENTFERRY_MSSQL_URL overrides). Uses its own database ``eventferry_bench_tds``.
Figures, for pyodbc and mssql-python each:
- drain: events/s one relay (``Relay(...).run()`` until empty, batches of 500) takes
  from ``--events`` pending events over 100 aggregates to RabbitMQ with confirms;
- publish_event: ms per call, each in its own transaction, against a plain ORM insert
  of a comparable row.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
DATABASE = "eventferry_bench_tds"


def endpoint_url() -> str:
    url = subprocess.run([str(ROOT / "scripts" / "ensure-tds-endpoint.sh")], check=True,
                         capture_output=True, text=True).stdout.strip()
    return url


def configure(url: str, driver: str) -> None:
    import django
    from django.conf import settings

    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    options = {"driver": query.pop("driver", "ODBC Driver 18 for SQL Server"),
               "extra_params": ";".join(f"{k}={v}" for k, v in query.items())}
    if driver == "mssql_python":
        options["python_driver"] = "mssql_python"
    settings.configure(
        SECRET_KEY="bench", USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        INSTALLED_APPS=["django.contrib.contenttypes", "eventferry_django",
                        "benchmarks.benchapp"],
        MIGRATION_MODULES={"contenttypes": None},
        DATABASES={"default": {
            "ENGINE": "mssql", "NAME": DATABASE, "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""), "HOST": parts.hostname,
            "PORT": str(parts.port or 1433), "OPTIONS": options, "CONN_MAX_AGE": None}},
        EVENTFERRY={"BATCH_SIZE": 500, "PUBLISHER": {
            "BACKEND": "eventferry_django.publishers.kombu.KombuPublisher",
            "OPTIONS": {"url": "amqp://guest:guest@127.0.0.1:5672//",
                        "exchange": "eventferry_bench_tds"}}},
        LOGGING={"version": 1, "disable_existing_loggers": False,
                 "root": {"level": "WARNING", "handlers": []}},
    )
    django.setup()


def create_database(url: str) -> None:
    import pyodbc

    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    conn = pyodbc.connect(
        f"DRIVER={{{query.get('driver', 'ODBC Driver 18 for SQL Server')}}};"
        f"SERVER={parts.hostname},{parts.port or 1433};UID={unquote(parts.username or '')};"
        f"PWD={unquote(parts.password or '')};Encrypt={query.get('Encrypt', 'no')}",
        autocommit=True)
    conn.execute(f"IF DB_ID(N'{DATABASE}') IS NULL CREATE DATABASE [{DATABASE}]")
    conn.close()


def measure(driver: str, events: int, publishes: int) -> dict[str, float]:
    """One driver's figures, in this (child) process."""
    import kombu
    from django.core.management import call_command
    from django.db import transaction

    from benchmarks.benchapp.models import PlainEvent
    from eventferry_django import publish_event
    from eventferry_django.models import OutboxEvent
    from eventferry_django.relay import Relay, RelayConfig

    call_command("migrate", run_syncdb=True, verbosity=0)
    OutboxEvent.objects.all().delete()
    PlainEvent.objects.all().delete()
    with kombu.Connection("amqp://guest:guest@127.0.0.1:5672//") as conn:
        exchange = kombu.Exchange("eventferry_bench_tds", "topic", durable=True)
        queue = kombu.Queue("eventferry_bench_tds", exchange, routing_key="#", durable=True)
        queue(conn.channel()).declare()
        queue(conn.channel()).purge()

    payload = {"order_id": 0, "customer": "c-42", "total": "129.90"}
    # One publish_event per event, 100 to a transaction: a multi-row publish_events
    # statement passes 4,000 characters, where the endpoint's parameter description fails
    # (the describe-parameters-long-statement gap of tests/engine_gaps.py).
    for start in range(0, events, 100):
        with transaction.atomic():
            for n in range(start, min(events, start + 100)):
                publish_event("bench", payload, aggregate_type="order", aggregate_id=f"o-{n % 100}")
    started = time.perf_counter()
    Relay(RelayConfig.from_settings(batch_size=500, until_empty=True)).run()
    drain = time.perf_counter() - started
    assert OutboxEvent.objects.filter(status=2).count() == events

    def timed(action: object) -> float:
        samples = []
        for n in range(publishes):
            t = time.perf_counter()
            with transaction.atomic():
                action(n)  # type: ignore[operator]
            samples.append(time.perf_counter() - t)
        return statistics.median(samples) * 1000

    publish_ms = timed(lambda n: publish_event("bench", payload, aggregate_type="order",
                                                    aggregate_id=f"p-{n}"))
    plain_ms = timed(lambda n: PlainEvent.objects.create(
        message_id=f"plain-{n}-{time.time_ns()}", topic="bench", aggregate_type="order",
        aggregate_id=f"p-{n}", payload=payload))
    return {"drain": events / drain, "publish": publish_ms, "plain": plain_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--publishes", type=int, default=200)
    parser.add_argument("--driver", choices=["pyodbc", "mssql_python"])
    args = parser.parse_args()
    url = os.environ.get("EVENTFERRY_MSSQL_URL") or endpoint_url()
    if args.driver:  # the child: one driver per process (Django is configured once)
        sys.path.insert(0, str(ROOT))
        configure(url, args.driver)
        figures = measure(args.driver, args.events, args.publishes)
        print(" ".join(f"{k}={v:.6f}" for k, v in figures.items()))
        return
    create_database(url)
    print(f"Babelfish for PostgreSQL (T-SQL endpoint, NOT SQL Server) + RabbitMQ, "
          f"{args.events:,} events over 100 aggregates, batch 500; "
          f"median of {args.publishes} publishes")
    print("| driver | relay drain, events/s | publish_event, ms | plain ORM insert, ms |")
    print("|---|---:|---:|---:|")
    for driver in ("pyodbc", "mssql_python"):
        out = subprocess.run(
            [sys.executable, __file__, "--driver", driver, "--events", str(args.events),
             "--publishes", str(args.publishes)],
            check=True, capture_output=True, text=True, env={**os.environ,
                                                             "EVENTFERRY_MSSQL_URL": url},
        ).stdout.split()[-3:]
        f = {k: float(v) for k, v in (item.split("=") for item in out)}
        print(f"| {driver} (Babelfish) | {f['drain']:,.0f} | {f['publish']:.2f} "
              f"| {f['plain']:.2f} |")


if __name__ == "__main__":
    main()
