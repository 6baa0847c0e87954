#!/usr/bin/env python
"""What one relay costs the database per delivered event, this tree against another
commit, side by side. Prints one table per database.

    python benchmarks/database_cost.py                      # against 871d0e9, PostgreSQL
    python benchmarks/database_cost.py --against 871d0e9 --vendors postgresql,mariadb

The outbox lives in the application's primary database, the one resource a team cannot
add more of by starting another process: this is the figure the relay's design is judged
by. Each round runs every source tree in turn, this one and ``--against``'s files from
git, their order alternating from round to round. For each: a fresh database on a private
server (:mod:`benchmarks.drain_databases`), migrated by that tree; one relay of that tree
started as a user starts one (``outbox_relay``, the settings' defaults) publishing to
:class:`benchmarks.simulated_broker.SimulatedBroker`, which confirms at once (a real
broker's CPU would share the machine); then ``--events`` pending rows over
``--aggregates`` aggregates committed in one statement. The clock and the counters run
from that commit to the last row done.

Columns, per delivered event: the database server's CPU (all its processes, from
``/proc``) and the relay's; the log the server wrote (PostgreSQL's WAL, InnoDB's redo
log); the outbox rows updated (PostgreSQL: heap-only updates, which write no index entry,
as a share) and deleted. Medians over the rounds; the last column is each tree's median
database CPU per event against ``--against``'s.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import servers  # noqa: E402
from benchmarks.cpu import CLOCK_TICKS, process_ticks  # noqa: E402
from benchmarks.drain_databases import (  # noqa: E402
    DATABASES,
    Database,
    Written,
    checked_in,
    in_a_process_each,
    private_directory,
)
from benchmarks.processes import terminate  # noqa: E402
from benchmarks.scale_out import any_open, insert_pending, relay_env  # noqa: E402
from benchmarks.soak_report import table  # noqa: E402

#: The commit the one-write work is measured against (issue 37's figures).
BASELINE = "871d0e9"


#: How a tree's relay is started: as a user starts one, with the settings' defaults.
RELAY = ("-m", "django", "outbox_relay", "--relay-id", "r0")


@dataclass(frozen=True)
class Tree:
    """A source tree whose relay is measured: this one, or a commit's files; ``command``
    starts the relay."""

    name: str
    path: Path
    command: tuple[str, ...] = RELAY


def commit_tree(ref: str, base: Path) -> Tree:
    """``ref``'s files, as ``git archive`` gives them, under ``base``."""
    path = base / f"tree-{ref}"
    path.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(path)], input=archive, check=True)
    return Tree(ref, path)


@dataclass(frozen=True)
class Drain:
    events: int
    seconds: float
    db_us: float
    relay_us: float
    written: Written

    def per_event(self, count: int) -> float:
        return count / self.events


def tree_env(database: Database, tree: Tree, env: dict[str, str] | None = None
             ) -> dict[str, str]:
    """``env`` (a relay's on the simulated broker, without) with ``tree``'s files in
    place of this tree's."""
    env = env or relay_env(database, 0)
    return dict(env, PYTHONPATH=os.pathsep.join(
        [str(tree.path), *env["PYTHONPATH"].split(os.pathsep)[1:]]))


def started(process: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> None:
    """Wait for the relay to check in with the relay registry, and a little longer: a
    relay looks at who else is running before its first claim."""
    deadline = time.monotonic() + timeout
    while checked_in() < 1:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the relay did not start; see {log}")
        time.sleep(0.1)
    time.sleep(1.5)


def drain(database: Database, tree: Tree, events: int, aggregates: int, logs: Path) -> Drain:
    from django.db import connections

    connections.close_all()
    database.drop()
    database.create()
    env = tree_env(database, tree)
    subprocess.run([sys.executable, "-m", "django", "migrate", "--run-syncdb", "-v", "0"],
                   cwd=tree.path, env=env, check=True)
    log = logs / f"relay-{tree.name}.log"
    with log.open("wb") as out:
        relay = subprocess.Popen(
            [sys.executable, *tree.command],
            cwd=tree.path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        started(relay, log)
        insert_pending(events, aggregates)
        before = database.written()
        pid = database.server_pid()
        db, relay_cpu, clock = process_ticks(pid), process_ticks(relay.pid), time.perf_counter()
        deadline = time.monotonic() + 1800
        while any_open():
            if relay.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the relay did not drain the outbox; see {log}")
            time.sleep(0.1)
        seconds = time.perf_counter() - clock
        db_us = (process_ticks(pid) - db) / CLOCK_TICKS * 1e6 / events
        relay_us = (process_ticks(relay.pid) - relay_cpu) / CLOCK_TICKS * 1e6 / events
    finally:
        terminate([relay], 60)
    # The table's statistics are flushed by the relay's backends as they exit.
    time.sleep(0.5)
    return Drain(events, seconds, db_us, relay_us, database.written() - before)


def row(tree: Tree, runs: list[Drain], baseline: list[Drain]) -> tuple[str, ...]:
    def median(value: Callable[[Drain], float]) -> float:
        return statistics.median(value(run) for run in runs)

    db_us = median(lambda r: r.db_us)
    against = statistics.median(r.db_us for r in baseline)
    return (
        tree.name, f"{median(lambda r: r.events / r.seconds):,.0f}", f"{db_us:.1f}",
        f"{median(lambda r: r.relay_us):.1f}",
        f"{median(lambda r: r.per_event(r.written.log_bytes)):,.0f}",
        f"{median(lambda r: r.per_event(r.written.updated)):.2f}",
        "n/a" if any(r.written.hot is None for r in runs)
        else f"{median(lambda r: (r.written.hot or 0) / max(r.written.updated, 1)):.0%}",
        f"{median(lambda r: r.per_event(r.written.deleted)):.2f}", f"{db_us / against:.2f}x",
    )


def report(name: str, args: argparse.Namespace, trees: list[Tree], base: Path) -> None:
    logs = base / "logs"
    logs.mkdir(exist_ok=True)
    runs: dict[str, list[Drain]] = {tree.name: [] for tree in trees}
    database = DATABASES[name](base / name)
    with database:
        database.create()
        os.environ.update(relay_env(database, 0))
        import django

        django.setup()
        for round_ in range(1, args.rounds + 1):
            for tree in trees if round_ % 2 else trees[::-1]:
                run = drain(database, tree, args.events, args.aggregates, logs)
                runs[tree.name].append(run)
                print(f"{name}, round {round_}, {tree.name}: {run.events / run.seconds:,.0f} "
                      f"ev/s, database {run.db_us:.1f} us/event, relay {run.relay_us:.1f} "
                      f"us/event, {run.per_event(run.written.log_bytes):,.0f} log bytes/event, "
                      f"{run.per_event(run.written.updated):.2f} updates/event", flush=True)
        from django.db import connections

        connections.close_all()
    print(f"\n{name}: one relay, {args.events:,} events over {args.aggregates:,} aggregates "
          f"committed at once, medians of {args.rounds} round(s); per delivered event")
    header = ("tree", "events/s", "database CPU us", "relay CPU us", "log bytes",
              "rows updated", "HOT", "rows deleted", f"database CPU vs {args.against}")
    print(table([row(tree, runs[tree.name], runs[args.against]) for tree in trees], header))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default=BASELINE, help="the commit to compare with")
    parser.add_argument("--vendors", default="postgresql", help="postgresql and/or mariadb")
    parser.add_argument("--events", type=int, default=290_000)
    parser.add_argument("--aggregates", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pg-bin", type=Path, default=None,
                        help="where initdb and postgres are (default: Debian's PostgreSQL 15)")
    args = parser.parse_args()
    if args.pg_bin:
        servers.PG_BIN = args.pg_bin
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    vendors = args.vendors.split(",")
    if in_a_process_each(vendors, __file__):
        return
    with private_directory("ef-database-cost-") as base:
        trees = [Tree("this tree", ROOT), commit_tree(args.against, base)]
        report(vendors[0], args, trees, base)


if __name__ == "__main__":
    main()
