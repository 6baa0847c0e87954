"""Claim latency on PostgreSQL while a backlog drains, with the outbox's autovacuum
tuning (``--tuned``, what the migration sets) or the server's defaults.

It reproduces what the soak saw mid-drain: a table of done rows and a pending backlog,
drained at a steady rate by set-based updates (pending to done: the one version a
relay leaves behind, its claim writing nothing), while a real claim of 100 (the relay's
SQL, rolled back) is timed
every few seconds under ``EXPLAIN (ANALYZE, BUFFERS)``, counting the heap pages its
index-only scans had to fetch for index entries vacuum had not yet removed. Autovacuum
runs as the server configures it (its one-minute naptime included), so a run needs a few
minutes to mean anything.

    python benchmarks/queue_vacuum.py --tuned
    python benchmarks/queue_vacuum.py --default
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import psycopg

from benchmarks.postgres import ensure_database
from eventferry_django.naming import TableName
from eventferry_django.store.claim import ClaimRequest
from eventferry_django.store.postgresql import PostgresqlDialect, PostgresqlSchema
from eventferry_django.store.sql import bind

DATABASE = "eventferry_queue_vacuum"
DIALECT = PostgresqlDialect(TableName("outbox"))


def build(conn: psycopg.Connection[Any], pending: int, done: int, *, tuned: bool) -> None:
    """The outbox as migrate creates it, ``done`` done rows then ``pending`` pending
    ones, vacuumed: the drain starts from a clean table."""
    conn.execute(f"DROP TABLE IF EXISTS {DIALECT.table}")
    for statement in DIALECT.schema.create_statements():
        conn.execute(statement)
    if not tuned:
        names = ", ".join(name for name, _ in PostgresqlSchema.AUTOVACUUM)
        conn.execute(f"ALTER TABLE {DIALECT.table} RESET ({names})")
    conn.execute(
        f"INSERT INTO {DIALECT.table} (message_id, topic, aggregate_type, aggregate_id, "
        "payload, status, processed_at) "
        "SELECT 'm' || n, 't', 'a', 'agg' || (n %% 5000), '{\"n\": 1}'::jsonb, "
        "CASE WHEN n <= %s THEN 2 ELSE 0 END, CASE WHEN n <= %s THEN now() END "
        "FROM generate_series(1, %s) AS n",
        [done, done, done + pending],
    )
    conn.execute(f"VACUUM (ANALYZE) {DIALECT.table}")


def drain_step(conn: psycopg.Connection[Any], events: int) -> None:
    """``events`` pending rows settled done, as relays would leave them."""
    q = DIALECT.ops.quote
    conn.execute(
        f"UPDATE {DIALECT.table} SET {q('status')} = 2, {q('processed_at')} = now() "
        f"WHERE {q('id')} IN (SELECT {q('id')} FROM {DIALECT.table} "
        f"WHERE {q('status')} = 0 ORDER BY {q('id')} LIMIT %s)", [events])


def heap_fetches(plan: Any) -> int:
    if isinstance(plan, dict):
        return int(plan.get("Heap Fetches", 0)) + sum(heap_fetches(v) for v in plan.values())
    if isinstance(plan, list):
        return sum(heap_fetches(v) for v in plan)
    return 0


def timed_claim(conn: psycopg.Connection[Any]) -> tuple[float, int]:
    """One claim of 100 (the relay's statement), rolled back: milliseconds, heap
    fetches."""
    sql, slots = DIALECT.claim.claim_sql()  # type: ignore[attr-defined]
    params = bind(slots, **DIALECT.claim.slots(ClaimRequest(100)))
    with conn.transaction(force_rollback=True):
        cursor = psycopg.ClientCursor(conn)
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
        [[plan]] = cursor.fetchall()
    return float(plan[0]["Execution Time"]), heap_fetches(plan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--tuned", action="store_true", help="the outbox's autovacuum tuning")
    mode.add_argument("--default", action="store_true", help="the server's defaults")
    parser.add_argument("--pending", type=int, default=300_000, help="default: %(default)s")
    parser.add_argument("--done", type=int, default=700_000, help="default: %(default)s")
    parser.add_argument("--rate", type=int, default=1_500,
                        help="events drained per second (default: %(default)s)")
    parser.add_argument("--seconds", type=int, default=180, help="default: %(default)s")
    args = parser.parse_args()

    ensure_database(DATABASE)
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname=DATABASE,
                         autocommit=True) as conn:
        started = time.monotonic()
        build(conn, args.pending, args.done, tuned=args.tuned)
        print(f"built {args.pending:,} pending + {args.done:,} done rows in "
              f"{time.monotonic() - started:.0f} s")
        samples: list[tuple[float, int]] = []
        start = time.monotonic()
        drained = 0
        while (elapsed := time.monotonic() - start) < args.seconds:
            due = int(elapsed * args.rate) - drained
            if due > 0:
                drain_step(conn, due)
                drained += due
            if not samples or elapsed >= 5 * len(samples):
                samples.append(timed_claim(conn))
            time.sleep(0.2)
        vacuums = conn.execute(
            "SELECT autovacuum_count FROM pg_stat_user_tables WHERE relid = %s::regclass",
            [DIALECT.table]).fetchone()
    times = sorted(ms for ms, _ in samples)
    fetches = [n for _, n in samples]
    print(f"{'tuned' if args.tuned else 'default'}: drained {drained:,} events in "
          f"{args.seconds} s; {len(samples)} claims of 100: median "
          f"{statistics.median(times):.1f} ms, p90 {times[int(len(times) * 0.9)]:.1f} ms, "
          f"max {times[-1]:.1f} ms; heap fetches median {statistics.median(fetches):,.0f}, "
          f"max {max(fetches):,}; autovacuums {vacuums[0] if vacuums else '?'}")


if __name__ == "__main__":
    main()
