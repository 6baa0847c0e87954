#!/usr/bin/env python
"""Relays far from the database and the broker: where scale-out pays. Prints one table.

    sudo python benchmarks/far.py                       # 100,000 events, 1/2/4/8 relays, 0/2/10 ms
    sudo python benchmarks/far.py --events 20000 --relays 1,4 --rtts 10

A private PostgreSQL and RabbitMQ (:mod:`benchmarks.servers`) run in a network namespace
of their own, reached over a veth pair (10.203.N.1 here, 10.203.N.2 there, N from this
process's id) whose both ends delay every packet by half the round trip (``tc netem``).
A kernel without netem (``sch_netem``; the development VM's has none) gets the delay
from :mod:`benchmarks.delay_proxy` instead, one proxy process per server on 127.0.0.1
(``--delay proxy``, the default there): the relays then reach both servers through it
at every round trip, 0 ms included, so the proxy's own cost is in every row.
The relays run here, as the ``outbox_relay`` command, with the defaults (``BATCH_SIZE``
500, ``BATCHES_IN_FLIGHT`` 2, ``MAX_CHAIN`` 500). For each round trip and relay count: the
relays start and check in with the relay registry, ``--events`` pending rows over
``--aggregates`` aggregates are committed in one statement, and the clock runs from
that commit to the last row done. Needs root (``ip netns``, ``tc``); everything it
creates (the namespace, the veth pair, the servers, their data) is removed on the way
out, also after Ctrl-C or a failure. Nothing else on the machine sees the delay.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.cpu import machine_ticks  # noqa: E402
from benchmarks.drain_databases import checked_in  # noqa: E402
from benchmarks.scale import bucket_sql, declare_capped_queue, numbers_sql  # noqa: E402
from benchmarks.servers import (  # noqa: E402
    PrivatePostgres,
    PrivateRabbitMQ,
    free_port,
    wait_for_port,
)
from benchmarks.soak import soak_env  # noqa: E402
from benchmarks.soak_report import table  # noqa: E402

PAD = 150  # payloads of about 200 bytes, as in benchmarks/scale.py
#: The delaying proxies' niceness (see :func:`delayed`).
PROXY_NICENESS = -10


class Namespace:
    """A network namespace joined to this one by a veth pair; :meth:`delay` sets the
    round trip across it."""

    def __init__(self) -> None:
        tag = os.getpid() % 100_000
        self.name = f"effar{tag}"
        self.here, self.there = f"efh{tag}", f"efn{tag}"
        subnet = f"10.203.{tag % 250}"
        self.address, self.peer = f"{subnet}.2", f"{subnet}.1"

    def _ip(self, *args: str, inside: bool = False) -> None:
        prefix = ["ip", "netns", "exec", self.name] if inside else []
        subprocess.run([*prefix, *args], check=True, capture_output=True)

    def __enter__(self) -> Namespace:
        self._ip("ip", "netns", "add", self.name)
        try:
            self._ip("ip", "link", "add", self.here, "type", "veth", "peer", "name", self.there)
            self._ip("ip", "link", "set", self.there, "netns", self.name)
            self._ip("ip", "addr", "add", f"{self.peer}/30", "dev", self.here)
            self._ip("ip", "link", "set", self.here, "up")
            self._ip("ip", "addr", "add", f"{self.address}/30", "dev", self.there, inside=True)
            self._ip("ip", "link", "set", self.there, "up", inside=True)
            self._ip("ip", "link", "set", "lo", "up", inside=True)
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._remove()

    def _remove(self) -> None:
        # Deleting the namespace deletes its end of the pair, and with it this end.
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
        subprocess.run(["ip", "link", "del", self.here], capture_output=True)

    def delay(self, rtt_ms: float) -> None:
        """Half the round trip on each end of the pair; 0 removes the delay."""
        for device, inside in ((self.here, False), (self.there, True)):
            if rtt_ms:
                self._ip("tc", "qdisc", "replace", "dev", device, "root", "netem", "delay",
                         f"{rtt_ms / 2}ms", inside=inside)
            else:
                prefix = ["ip", "netns", "exec", self.name] if inside else []
                subprocess.run([*prefix, "tc", "qdisc", "del", "dev", device, "root"],
                               capture_output=True)


def has_netem(net: Namespace) -> bool:
    """Whether the kernel can delay packets with ``tc netem``."""
    try:
        net.delay(0.001)
    except subprocess.CalledProcessError:
        return False
    net.delay(0)
    return True


@contextlib.contextmanager
def delayed(net: Namespace, database: PrivatePostgres, broker: PrivateRabbitMQ,
            rtt_ms: float, env: dict[str, str], *, netem: bool) -> Iterator[dict[str, str]]:
    """``rtt_ms`` between the relays and both servers while inside; yields the relays'
    environment."""
    if netem:
        net.delay(rtt_ms)
        try:
            yield env
        finally:
            net.delay(0)
        return
    proxies, ports = [], []
    for server in (database, broker):
        port = free_port()
        # Raised above the relays and the machine's other work: a network delays
        # packets without waiting for a CPU, and a proxy starved of one would add its
        # own delay (on the loaded development machine, more than the one asked for).
        proxies.append(subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / "delay_proxy.py"), str(port),
             net.address, str(server.port), str(rtt_ms / 2)], start_new_session=True,
            preexec_fn=lambda: os.nice(PROXY_NICENESS)))
        ports.append(port)
    try:
        for port in ports:
            wait_for_port(port, timeout=30)
        amqp = f"amqp://guest:guest@127.0.0.1:{ports[1]}//"
        settings = json.loads(env["EVENTFERRY_SOAK_EVENTFERRY"])
        settings["PUBLISHER"]["OPTIONS"]["url"] = amqp
        yield dict(env, EVENTFERRY_SOAK_DB_HOST="127.0.0.1", EVENTFERRY_SOAK_DB_PORT=str(ports[0]),
                   EVENTFERRY_SOAK_AMQP=amqp, EVENTFERRY_SOAK_EVENTFERRY=json.dumps(settings))
    finally:
        for proxy in proxies:
            proxy.terminate()
            proxy.wait(10)


class FarPostgres(PrivatePostgres):
    """The private PostgreSQL, trusting the relays' end of the veth pair too."""

    def initialise(self) -> None:
        super().initialise()
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {self.host.rsplit('.', 1)[0]}.0/30 trust\n")


class FarRabbitMQ(PrivateRabbitMQ):
    """The private RabbitMQ, letting ``guest`` in from beyond its loopback."""

    def initialise(self) -> None:
        super().initialise()
        (self.base / "rabbitmq.conf").write_text("loopback_users = none\n")


def insert_pending(events: int, aggregates: int) -> None:
    from django.db import connection

    from eventferry_django.models import OutboxEvent

    name = connection.ops.quote_name(OutboxEvent._meta.db_table)
    stamp = time.time_ns()
    aggregate = "'agg-' || (n %% %(aggregates)s)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {name} (message_id, topic, aggregate_type, aggregate_id, payload, "
            f"headers, bucket) SELECT %(prefix)s || n, 'far.event', 'account', {aggregate}, "
            "jsonb_build_object('n', n, 'pad', repeat('x', %(pad)s)), '{}', "
            f"{bucket_sql(aggregate, 'postgresql')} "
            f"FROM ({numbers_sql('postgresql')}) AS s ORDER BY n",
            {"prefix": f"far-{stamp}-", "start": 1, "stop": events, "pad": PAD,
             "aggregates": aggregates})


def empty_outbox() -> None:
    """What autovacuum does between bursts: without it, each drain's dead index entries
    (two a row) slow the next drain's claims, and the later drains of a run (the larger
    relay counts) would be measured on a more bloated table than the first."""
    from django.db import connection

    from eventferry_django.models import OutboxEvent

    name = connection.ops.quote_name(OutboxEvent._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {name}")
        cursor.execute(f"VACUUM ANALYZE {name}")


def open_rows() -> int:
    from eventferry_django.models import OutboxEvent

    return OutboxEvent.objects.open().count()


@contextlib.contextmanager
def relays(count: int, env: dict[str, str], logs: Path) -> Iterator[None]:
    processes = []
    for n in range(count):
        with (logs / f"relay-{count}-{n}.log").open("ab") as out:
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "django", "outbox_relay", "--relay-id", f"far-{n}",
                 "--poll-interval", "0.2"],
                env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT))
    try:
        deadline = time.monotonic() + 120
        while checked_in() < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"relays did not check in; see {logs}")
            time.sleep(0.2)
        time.sleep(2.5)  # a check-in interval: each has seen the last to join
        yield
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()


@dataclass(frozen=True)
class Drain:
    rate: float
    #: Share of the machine's CPU time (every core) that was busy during the drain.
    busy: float


def drain(count: int, events: int, aggregates: int, env: dict[str, str], logs: Path
          ) -> Drain:
    """Events per second, from the commit of ``events`` rows to the last one done, and
    how busy the machine was meanwhile."""
    empty_outbox()
    with relays(count, env, logs):
        started, (busy, total) = time.perf_counter(), machine_ticks()
        insert_pending(events, aggregates)
        while open_rows():
            time.sleep(0.2)
        seconds = time.perf_counter() - started
        busy_after, total_after = machine_ticks()
        return Drain(events / seconds, (busy_after - busy) / max(total_after - total, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--aggregates", type=int, default=100)
    parser.add_argument("--relays", default="1,2,4,8")
    parser.add_argument("--rtts", default="0,2,10", help="round trips in ms")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="the relays' BATCH_SIZE (default: the setting's default)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="interleaved rounds of the whole grid; the table shows medians")
    parser.add_argument("--delay", choices=("auto", "netem", "proxy"), default="auto",
                        help="how the round trip is made (auto: netem where the kernel has "
                        "it, else the delaying proxy)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        parser.error("needs root: it creates a network namespace and sets tc netem delays")
    counts = [int(n) for n in args.relays.split(",")]
    rtts = [float(ms) for ms in args.rtts.split(",")]
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    base = Path(tempfile.mkdtemp(prefix="ef-far-"))
    base.chmod(0o755)  # the private PostgreSQL runs as postgres when we are root
    logs = base / "logs"
    logs.mkdir()
    runs: dict[tuple[float, int], list[Drain]] = {}
    netem = False
    try:
        with Namespace() as net:
            database, broker = FarPostgres(base / "db"), FarRabbitMQ(base / "rabbitmq")
            for server in (database, broker):
                server.host, server.netns = net.address, net.name
            with database, broker:
                import psycopg

                with psycopg.connect(host=net.address, port=database.port, user="postgres",
                                     dbname="postgres", autocommit=True) as conn:
                    conn.execute("CREATE DATABASE soak")
                env = dict(soak_env("postgres", database.port, broker.url, args.batch_size),
                           EVENTFERRY_SOAK_DB_HOST=net.address)
                os.environ.update(env)
                import django

                django.setup()
                from django.core.management import call_command

                call_command("migrate", verbosity=0, run_syncdb=True)
                declare_capped_queue(broker.url)
                netem = args.delay == "netem" or (args.delay == "auto" and has_netem(net))
                for round_ in range(1, args.rounds + 1):
                    for rtt in rtts:
                        with delayed(net, database, broker, rtt, env, netem=netem) as far_env:
                            for count in counts:
                                run = drain(count, args.events, args.aggregates, far_env, logs)
                                runs.setdefault((rtt, count), []).append(run)
                                print(f"round {round_}, {rtt:g} ms, {count} relay(s): "
                                      f"{run.rate:,.0f} ev/s, machine {run.busy:.0%} busy",
                                      flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    results = {key: statistics.median(run.rate for run in drains)
               for key, drains in runs.items()}
    busy = {key: statistics.median(run.busy for run in drains) for key, drains in runs.items()}
    rows = [(f"{rtt:g} ms", *(f"{results[rtt, n]:,.0f} "
                              f"({results[rtt, n] / results[rtt, counts[0]]:.1f}x, "
                              f"{busy[rtt, n]:.0%} busy)"
                              for n in counts)) for rtt in rtts]
    batch = f"BATCH_SIZE {args.batch_size}" if args.batch_size else "defaults"
    print(f"PostgreSQL 15 and RabbitMQ (private, {dt.date.today()}), {args.events:,} events over "
          f"{args.aggregates} aggregates, {batch}, delay by {'netem' if netem else 'proxy'}, "
          f"median of {args.rounds} interleaved round(s), "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; events/s from "
          "the commit to the last row done (x: against the first relay count; busy: the "
          "machine's CPU, every core, during the drain)")
    print(table(rows, ("round trip", *(f"{n} relay(s)" for n in counts))))


if __name__ == "__main__":
    main()
