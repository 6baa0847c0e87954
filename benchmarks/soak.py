#!/usr/bin/env python
"""Soak: events through relay crashes and broker and database restarts. Prints one table.

    python benchmarks/soak.py --db postgres                   # 1,000,000 events, all faults
    python benchmarks/soak.py --db mariadb --events 50000 --faults 0.15

Private servers (:mod:`benchmarks.servers`: a database and a RabbitMQ node of its own,
on ports of its own), so restarting them disturbs nobody. Then, at once:
- 4 writer processes (:mod:`benchmarks.soak_writer`) publish ``--events`` events over
  1,000 aggregates, a business row and its 1 to 8 events in each transaction, payloads
  of 100 B to 4 KB; one transaction in 250 is rolled back after publishing;
- 4 ``manage.py outbox_relay`` processes drain the outbox into a durable queue;
- one consumer process (:mod:`benchmarks.soak_consumer`) records every delivery;
- at random moments while the writers write: ``kill -9`` of a relay (restarted at once)
  20 times, 3 RabbitMQ restarts, 1 database crash and restart (``--faults`` scales
  these counts, rounding up).
When the writers are done and the outbox is drained, the table compares what was
written, what the outbox holds and what arrived (:mod:`benchmarks.soak_report`): a row
with a bound says ``ok`` or ``FAILED``, and the last line is ``FAILED: lost=3, dead=2``
(each failed row, and any relay or writer that exited on its own) or ``passed: ...``; the
exit status is 1 on failure.

The first line printed is the seed, and the command that runs the soak again with it.
Every process the soak starts ends with it, whatever ends the soak: its own clean-up on a
return, an error, SIGINT, SIGTERM or SIGHUP (exit status 128 + the signal), and for a
``kill -9`` a parent-death signal and a watchdog (:mod:`benchmarks.soak_watchdog`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.processes import terminate  # noqa: E402
from benchmarks.servers import (  # noqa: E402
    PrivateMariaDB,
    PrivatePostgres,
    PrivateRabbitMQ,
    PrivateServer,
)
from benchmarks.soak_report import (  # noqa: E402
    judge,
    read_deliveries,
    read_written,
    row,
    summary,
    table,
)
from benchmarks.soak_watchdog import (  # noqa: E402
    MARK_VARIABLE,
    die_with_parent,
    new_mark,
)
from benchmarks.soak_watchdog import start as start_watchdog  # noqa: E402

EXCHANGE = "eventferry_soak"
QUEUE = "eventferry_soak"
KILLS, BROKER_RESTARTS, DATABASE_RESTARTS = 20, 3, 1
#: A killed relay's rows come back after this lease (seconds).
CLAIM_TIMEOUT = 10
BATCHES_IN_FLIGHT = 2
#: Give up waiting for the drain after this long without a new delivery (seconds).
STALL_LIMIT = 120.0


# -- the processes ------------------------------------------------------------------------
def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM) in MB, or 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Relays:
    """``count`` relay processes; a killed one is restarted in its slot."""

    count: int
    env: dict[str, str]
    logs: Path
    batch_size: int
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    started: int = 0
    unexpected_exits: list[str] = field(default_factory=list)
    peak_mb: float = 0.0

    def _start(self) -> subprocess.Popen[bytes]:
        self.started += 1
        with (self.logs / f"relay-{self.started}.log").open("ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "django", "outbox_relay", "--poll-interval", "0.5",
                 "--batch-size", str(self.batch_size),
                 "--batches-in-flight", str(BATCHES_IN_FLIGHT)],
                env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent())
        CHILDREN.append(process)
        return process

    def start(self) -> None:
        self.processes = [self._start() for _ in range(self.count)]

    def kill_one(self, rng: random.Random) -> None:
        slot = rng.randrange(self.count)
        victim = self.processes[slot]
        self.sample()
        victim.send_signal(signal.SIGKILL)
        victim.wait(30)
        self.processes[slot] = self._start()

    def sample(self) -> None:
        """Note the peak RSS, and restart (and report) any relay that died on its own."""
        for slot, process in enumerate(self.processes):
            self.peak_mb = max(self.peak_mb, peak_rss_mb(process.pid))
            if process.poll() is not None:
                self.unexpected_exits.append(f"relay pid {process.pid} exited with "
                                             f"{process.returncode}")
                self.processes[slot] = self._start()

    def stop(self) -> None:
        self.sample()
        for process in terminate(self.processes, 60):
            self.unexpected_exits.append(f"relay pid {process.pid} ignored SIGTERM")


class Progress:
    """Counts lines appended to files by other processes, reading only what is new."""

    def __init__(self, paths: list[Path]) -> None:
        self.offsets = dict.fromkeys(paths, 0)
        self.lines = 0

    def update(self) -> int:
        for path, offset in self.offsets.items():
            if not path.exists():
                continue
            with path.open("rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            complete = chunk.rfind(b"\n") + 1
            self.lines += chunk.count(b"\n", 0, complete)
            self.offsets[path] = offset + complete
            self.seen(chunk[:complete])
        return self.lines

    def seen(self, chunk: bytes) -> None:
        """Hook for the lines just read."""


class Received(Progress):
    """Also the distinct message ids (each delivery line's first field)."""

    def __init__(self, path: Path) -> None:
        super().__init__([path])
        self.ids: set[bytes] = set()

    def seen(self, chunk: bytes) -> None:
        self.ids.update(line.split(b" ", 1)[0] for line in chunk.splitlines())


# -- faults --------------------------------------------------------------------------------
def schedule(rng: random.Random, scale: float) -> list[tuple[float, str]]:
    """(fraction of the events written, or of --budget gone, and the fault) pairs, at
    random points in 5%..90%."""
    faults = (["kill"] * math.ceil(KILLS * scale)
              + ["broker"] * math.ceil(BROKER_RESTARTS * scale)
              + ["database"] * math.ceil(DATABASE_RESTARTS * scale))
    return sorted((rng.uniform(0.05, 0.9), fault) for fault in faults)


# -- setting up ----------------------------------------------------------------------------
def create_database(vendor: str, port: int) -> None:
    if vendor == "postgres":
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres",
                             autocommit=True) as conn:
            conn.execute("CREATE DATABASE soak")
    else:
        import pymysql

        conn = pymysql.connect(host="127.0.0.1", port=port, user="root")
        with conn.cursor() as cursor:
            cursor.execute("CREATE DATABASE soak CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        conn.close()


def declare_queue(url: str) -> None:
    import kombu

    with kombu.Connection(url) as conn:
        exchange = kombu.Exchange(EXCHANGE, "topic", durable=True)
        kombu.Queue(QUEUE, exchange, routing_key="#", durable=True)(conn.channel()).declare()


def soak_env(vendor: str, db_port: int, amqp: str, batch_size: int | None = None
             ) -> dict[str, str]:
    """The processes' environment; ``batch_size`` None leaves ``BATCH_SIZE`` at its default."""
    eventferry: dict[str, object] = {
        "CLAIM_TIMEOUT": CLAIM_TIMEOUT,
        "PUBLISHER": {"BACKEND": "eventferry_django.publishers.kombu.KombuPublisher",
                      "OPTIONS": {"url": amqp, "exchange": EXCHANGE}},
    }
    if batch_size is not None:
        eventferry["BATCH_SIZE"] = batch_size
    return dict(os.environ, PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="benchmarks.soak_settings",
                EVENTFERRY_SOAK_VENDOR=vendor, EVENTFERRY_SOAK_DB_PORT=str(db_port),
                EVENTFERRY_SOAK_AMQP=amqp, EVENTFERRY_SOAK_EVENTFERRY=json.dumps(eventferry))


def outbox_state() -> tuple[dict[str, int], int]:
    """Every outbox row's message id and status, and the DEAD code."""
    from eventferry_django.models import OutboxEvent, Status

    return dict(OutboxEvent.objects.values_list("message_id", "status").iterator(
        chunk_size=20_000)), int(Status.DEAD)


def open_rows() -> int:
    from django.db import DatabaseError, connection

    from eventferry_django.models import OutboxEvent

    try:
        return OutboxEvent.objects.open().count()
    except DatabaseError:
        connection.close()
        return -1


def outbox_rows() -> int:
    from eventferry_django.models import OutboxEvent

    return OutboxEvent.objects.count()


# -- the run -------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("postgres", "mariadb"), default="postgres")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--faults", type=float, default=1.0,
                        help="scale of the fault counts (20 kills, 3 broker restarts, "
                        "1 database restart at 1.0; rounded up; 0 for none)")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--relays", type=int, default=4)
    parser.add_argument("--aggregates", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--max-per-transaction", type=int, default=8,
                        help="a writer transaction publishes 1..this many events")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                        help="stop the writers after this long, short of --events if need "
                        "be (the table shows what was published)")
    parser.add_argument("--keep", action="store_true",
                        help="keep logs, records and the (stopped) servers' directories")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    print(f"soak seed {seed}; the same run again (same writers' streams and fault "
          f"schedule):\n  {rerun_command(seed)}", flush=True)
    for signum in STOP_SIGNALS:
        signal.signal(signum, stop_on_signal)
    rng = random.Random(seed)
    base = Path(tempfile.mkdtemp(prefix="ef-soak-"))
    base.chmod(0o755)  # the private PostgreSQL runs as postgres when we are root
    logs = base / "logs"
    logs.mkdir()
    database: PrivateServer = (PrivatePostgres if args.db == "postgres" else PrivateMariaDB)(
        base / "database")
    broker = PrivateRabbitMQ(base / "rabbitmq")
    database.keep = broker.keep = args.keep
    # Whatever we start from here on carries the mark, and the watchdog ends it all
    # once we are gone, should our own clean-up never run (kill -9).
    mark = new_mark()
    os.environ[MARK_VARIABLE] = mark
    WATCHDOG.append(start_watchdog(mark, [] if args.keep else [database.base, broker.base],
                                   base))
    failed = True  # until the verdict says otherwise: an error keeps the logs
    try:
        with database, broker:
            print(f"servers: {database.name} on 127.0.0.1:{database.port}, RabbitMQ on "
                  f"127.0.0.1:{broker.port}; files in {base}", flush=True)
            create_database(args.db, database.port)
            env = soak_env(args.db, database.port, broker.url, args.batch_size)
            os.environ.update(env)
            import django

            django.setup()
            from django.core.management import call_command
            from django.db import connection

            from benchmarks.benchapp.models import SoakAccount

            call_command("migrate", verbosity=0, run_syncdb=True)
            SoakAccount.objects.bulk_create(
                [SoakAccount(pk=n) for n in range(1, args.aggregates + 1)])
            connection.close()
            declare_queue(broker.url)
            failed, verdict = run(args, rng, seed, env, base, logs, database, broker)
    finally:
        if failed or args.keep:
            print(f"records and logs kept in {base}", flush=True)
        else:
            shutil.rmtree(base, ignore_errors=True)
    print(verdict)  # the last line: FAILED: naming each failed row, or passed:
    return 1 if failed else 0


#: Every process the soak started, ended on the way out whatever happens.
CHILDREN: list[subprocess.Popen[bytes]] = []
#: The write end of the watchdog's pipe, open as long as this process lives.
WATCHDOG: list[int] = []
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stop_on_signal(signum: int, frame: FrameType | None) -> None:
    """SIGINT, SIGTERM (a caller's timeout) or SIGHUP unwind like an error: children
    ended, servers stopped, exit status 128 + the signal. Once: a second signal must not
    cut the clean-up short (``kill -9`` does, and the watchdog finishes it)."""
    for other in STOP_SIGNALS:
        signal.signal(other, signal.SIG_IGN)
    print(f"soak: {signal.Signals(signum).name}; stopping its processes and servers",
          file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


def rerun_command(seed: int) -> str:
    """This command line, with ``--seed`` set to ``seed``."""
    argv: list[str] = []
    rest = iter(sys.argv[1:])
    for arg in rest:
        if arg == "--seed":
            next(rest, None)
        elif not arg.startswith("--seed="):
            argv.append(arg)
    return shlex.join([sys.executable, sys.argv[0], *argv, "--seed", str(seed)])


def end_children() -> None:
    for process in CHILDREN:
        if process.poll() is None:
            process.kill()
            process.wait(30)


def run(args: argparse.Namespace, rng: random.Random, seed: int, env: dict[str, str],
        base: Path, logs: Path, database: PrivateServer, broker: PrivateRabbitMQ
        ) -> tuple[bool, str]:
    try:
        return soak(args, rng, seed, env, base, logs, database, broker)
    finally:
        end_children()


def soak(args: argparse.Namespace, rng: random.Random, seed: int, env: dict[str, str],
         base: Path, logs: Path, database: PrivateServer, broker: PrivateRabbitMQ
         ) -> tuple[bool, str]:
    """Run the soak on servers ready for it; returns whether it failed, and the line
    that says so (:func:`benchmarks.soak_report.summary`)."""
    from django.db import connection

    deliveries = base / "deliveries.txt"
    consumer = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.soak_consumer", "--url", broker.url, "--queue",
         QUEUE, "--out", str(deliveries)],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=(logs / "consumer.log").open("ab"), preexec_fn=die_with_parent())
    CHILDREN.append(consumer)
    relays = Relays(args.relays, env, logs, args.batch_size)
    relays.start()
    started = time.monotonic()
    share, extra = divmod(args.events, args.writers)
    outputs = [base / f"written-{n}.txt" for n in range(args.writers)]
    writers = [
        subprocess.Popen(
            [sys.executable, "-m", "benchmarks.soak_writer", "--events",
             str(share + (1 if n < extra else 0)), "--aggregates", str(args.aggregates),
             "--max-per-transaction", str(args.max_per_transaction),
             "--seed", str(seed + n), "--out", str(outputs[n])],
            env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
            stderr=(logs / f"writer-{n}.log").open("ab"), preexec_fn=die_with_parent())
        for n in range(args.writers)]
    CHILDREN.extend(writers)
    print(f"running: consumer pid {consumer.pid}, relay pids "
          f"{' '.join(str(r.pid) for r in relays.processes)}, writer pids "
          f"{' '.join(str(w.pid) for w in writers)}", flush=True)
    faults = schedule(rng, args.faults)
    done: list[str] = []
    written = Progress(outputs)
    received = Received(deliveries)
    told = False
    while any(w.poll() is None for w in writers) or faults:
        relays.sample()
        if args.budget is not None and time.monotonic() - started > args.budget and not told:
            # Once: a second SIGTERM could land while a writer's interpreter shuts down,
            # when its handler is gone, and kill it.
            told = True
            for writer in writers:
                if writer.poll() is None:
                    writer.send_signal(signal.SIGTERM)
        fraction = written.update() / max(1, args.events)
        if args.budget:  # short of --events, the faults keep to the time there is
            fraction = max(fraction, (time.monotonic() - started) / args.budget)
        while faults and (fraction >= faults[0][0] or all(w.poll() is not None
                                                          for w in writers)):
            _, fault = faults.pop(0)
            moment = f"{time.monotonic() - started:.0f} s"
            if fault == "kill":
                relays.kill_one(rng)
                done.append(f"kill -9 at {moment}")
            elif fault == "broker":
                done.append(f"RabbitMQ restart at {moment} ({broker.restart():.1f} s down)")
            else:
                done.append(f"{database.name} crash+restart at {moment} "
                            f"({database.restart():.1f} s down)")
                connection.close()
        time.sleep(0.2)
    writer_codes = [w.wait() for w in writers]
    writing = time.monotonic() - started

    # The drain: until nothing is open and the consumer has every row, or it stalls.
    last_count, last_change = -1, time.monotonic()
    while True:
        relays.sample()
        count = received.update()
        if count != last_count:
            last_count, last_change = count, time.monotonic()
        if open_rows() == 0 and len(received.ids) >= outbox_rows():
            time.sleep(2.0)  # the last acks, and any late duplicate
            break
        if time.monotonic() - last_change > STALL_LIMIT:
            break
        time.sleep(0.5)
    relays.stop()
    consumer.send_signal(signal.SIGTERM)
    consumer.wait(60)
    wall = time.monotonic() - started

    outbox, dead_status = outbox_state()
    verdict = judge(read_written(outputs), outbox, dead_status, read_deliveries(deliveries))
    kills = sum(1 for f in done if f.startswith("kill"))
    restarts = len(done) - kills
    bound = args.batch_size * BATCHES_IN_FLIGHT * (kills + args.relays * restarts)
    lost, phantoms, duplicates, disorder, dead = checks = verdict.checks(bound)
    must0 = "0"
    rows = [
        row("published (publish_event calls)", f"{verdict.published:,}"),
        row("rolled back on purpose (1 transaction in 250)", f"{verdict.rolled_back:,}"),
        row("committed (outbox rows)", f"{verdict.committed:,}"),
        row("delivered (distinct message ids)", f"{verdict.delivered:,}"),
        row("lost", f"{lost.value:,}", must0, lost),
        row("phantoms from rolled-back transactions", f"{phantoms.value:,}", must0, phantoms),
        row("duplicates from the relays", f"{duplicates.value:,}",
            f"<= {bound:,} (batch {args.batch_size} x {BATCHES_IN_FLIGHT} in flight x "
            f"({kills} kills + {args.relays} relays x {restarts} restarts))", duplicates),
        row("redeliveries by the broker (consumer acks lost)",
            f"{verdict.redelivered_by_broker:,}"),
        row("order violations, first deliveries per aggregate", f"{disorder.value:,}", must0,
            disorder),
        row("dead", f"{dead.value:,}", must0, dead),
        row("faults", f"{kills} relay kill -9, "
            f"{sum(1 for f in done if f.startswith('RabbitMQ'))} RabbitMQ restarts, "
            f"{sum(1 for f in done if 'crash' in f)} {database.name} crash+restarts"),
        row("throughput, first commit to last delivery", f"{verdict.throughput:,.0f} events/s"),
        row("commit-to-delivery latency p50", f"{verdict.percentile(0.5):,.0f} ms"),
        row("commit-to-delivery latency p99", f"{verdict.percentile(0.99):,.0f} ms"),
        row("relays' peak RSS (largest of all relay processes)", f"{relays.peak_mb:,.0f} MB"),
        row("wall time (writing / total)", f"{writing:,.0f} s / {wall:,.0f} s"),
    ]
    if any(check.failed for check in checks):  # the rows as the outbox ends, for the post-mortem
        from eventferry_django.models import OutboxEvent

        with (base / "outbox.txt").open("w") as out:
            for values in OutboxEvent.objects.order_by("id").values_list(
                    "id", "message_id", "aggregate_id", "status", "attempts", "created_at",
                    "claimed_at", "processed_at").iterator(chunk_size=20_000):
                out.write(" ".join(str(v).replace(" ", "T") for v in values) + "\n")
    others = relays.unexpected_exits + [f"writer {n} exited with {c}"
                                        for n, c in enumerate(writer_codes) if c]
    print(f"soak on {database.name} + RabbitMQ (private servers), {args.events:,} events, "
          f"{args.writers} writers, {args.relays} relays, {args.aggregates:,} aggregates, "
          f"batch {args.batch_size}, lease {CLAIM_TIMEOUT} s, seed {seed}, "
          f"{os.cpu_count()} cores")
    print(table(rows))
    for fault in done:
        print(f"  fault: {fault}")
    return any(check.failed for check in checks) or bool(others), summary(checks, others)

if __name__ == "__main__":
    sys.exit(main())
