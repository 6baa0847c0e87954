"""Claim cost on PostgreSQL under stale statistics (issue 22), with an unfiltered retention
index (what the outbox had before issue 22) or the closed-rows index (0.1.0's), and with
or without an ANALYZE
before the drain.

The stale case: the outbox holds only done rows when it is analysed (the planner then
believes no row is open and both open-rows indexes hold nothing), then a backlog
arrives and autovacuum is kept from analysing again (as crash recovery's reset counters
and the slow claims' few changes kept it in the soak). The backlog is drained the
relay's way: each pass one claim (the relay's prepared claim with chains, under its
transaction settings, its generic plan included) and one ack, committed. Reported: the
drain's time, the slowest claim, and the index entries read per index
(``pg_stat_user_indexes.idx_tup_read``).

    python benchmarks/claim_plan.py                      # every variant
    python benchmarks/claim_plan.py --only closed-stale --done 200000 --pending 20000
    python benchmarks/claim_plan.py --analyze-cost 1000000
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import psycopg
from psycopg import sql as pgsql

from benchmarks.postgres import ensure_database
from eventferry_django.contract import DONE, PENDING
from eventferry_django.naming import TableName
from eventferry_django.store.claim import ClaimRequest
from eventferry_django.store.postgresql import PostgresqlDialect
from eventferry_django.store.sql import bind
from eventferry_django.store.tables import retention_index

DATABASE = "eventferry_claim_plan"
DIALECT = PostgresqlDialect(TableName("outbox"))
VARIANTS = ("unfiltered-stale", "closed-stale", "unfiltered-fresh", "closed-fresh",
            "unfiltered-crash", "closed-crash")


def connect() -> psycopg.Connection[Any]:
    return psycopg.connect(host="127.0.0.1", user="postgres", dbname=DATABASE,
                           autocommit=True, prepare_threshold=None)


def claim_statement(limit: int, max_chain: int) -> tuple[str, list[Any]]:
    """The relay's claim of ``limit`` rows with chains of ``max_chain``, its parameters
    bound as the relay binds them (one relay: no buckets, nothing in flight)."""
    sql, params = DIALECT.claim.claim_sql()
    request = ClaimRequest(limit, max_chain=max_chain)
    return sql, bind(params, **DIALECT.claim.slots(request))


def build(conn: psycopg.Connection[Any], *, done: int, pending: int, aggregates: int,
          closed_rows_index: bool, fresh: bool, crash: bool = False) -> None:
    conn.execute(f"DROP TABLE IF EXISTS {DIALECT.table}")
    for statement in DIALECT.schema.create_statements():
        conn.execute(statement)
    if not closed_rows_index:
        unfiltered = retention_index(DIALECT.name, closed_rows_only=False)
        for statement in DIALECT.schema.create_index_statements(unfiltered,
                                                                 DIALECT.schema.outbox):
            conn.execute(statement)
        conn.execute(f'DROP INDEX "{DIALECT.name.closed_index}"')
    conn.execute(f"ALTER TABLE {DIALECT.table} SET (autovacuum_enabled = false)")
    insert = (
        f"INSERT INTO {DIALECT.table} (message_id, topic, aggregate_type, aggregate_id, "
        "payload, status, processed_at) "
        "SELECT %s || n, 't', 'a', 'agg' || (n %% %s), '{\"n\": 1}'::jsonb, %s, "
        "CASE WHEN %s = %s THEN now() END FROM generate_series(1, %s) AS n")
    conn.execute(insert, ["d", aggregates, DONE, DONE, DONE, done])
    conn.execute(f"VACUUM (ANALYZE) {DIALECT.table}")  # statistics: nothing is open
    conn.execute(insert, ["p", aggregates, PENDING, PENDING, DONE, pending])
    if fresh or crash:
        conn.execute(f"ANALYZE {DIALECT.table}")
    if crash:
        # What the soak's catalog said after crash recovery: both open-rows indexes
        # believed to hold 3 entries (their size on disk unchanged).
        conn.execute("UPDATE pg_class SET reltuples = 3 WHERE oid IN (%s::regclass, "
                     "%s::regclass)", [f'"{DIALECT.name.aggregate_index}"',
                                       f'"{DIALECT.name.claim_index}"'])


def index_reads(conn: psycopg.Connection[Any]) -> dict[str, int]:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    rows = conn.execute(
        "SELECT indexrelname, idx_tup_read FROM pg_stat_user_indexes WHERE relid = "
        "%s::regclass", [DIALECT.table]).fetchall()
    return {name: int(n) for name, n in rows}


def claim_plan(conn: psycopg.Connection[Any], limit: int, max_chain: int) -> str:
    """EXPLAIN ANALYZE of the relay's claim as a generic plan, rolled back."""
    sql, params = claim_statement(limit, max_chain)
    parts = sql.split("%s")
    numbered = "".join(f"{p}${i}" for i, p in enumerate(parts[:-1], 1)) + parts[-1]
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.execute("DEALLOCATE ALL")
        conn.execute(f"PREPARE claim_plan AS {numbered}")
        explain = pgsql.SQL("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE claim_plan({})")
        rows = conn.execute(explain.format(
            pgsql.SQL(", ").join(pgsql.Literal(p) for p in params))).fetchall()
        conn.execute("DEALLOCATE claim_plan")
    return "\n".join(row[0] for row in rows)


def drain(conn: psycopg.Connection[Any], limit: int, max_chain: int) -> tuple[int, float, float]:
    """Claim and ack until nothing is left: (claims, seconds, slowest claim's seconds)."""
    sql, params = claim_statement(limit, max_chain)
    claims, slowest, started = 0, 0.0, time.monotonic()
    q = DIALECT.ops.quote
    while True:
        with conn.transaction():
            conn.execute(DIALECT.ops.relay_transaction_sql or "SELECT 1")
            began = time.monotonic()
            rows = conn.execute(sql, params, prepare=True).fetchall()
            slowest = max(slowest, time.monotonic() - began)
            claims += 1
            if not rows:
                break
            conn.execute(f"UPDATE {DIALECT.table} SET {q('status')} = %s, "
                         f"{q('processed_at')} = now() WHERE {q('id')} = ANY(%s)",
                         [DONE, [row[0] for row in rows]])
    conn.execute("SELECT pg_stat_force_next_flush()")
    return claims, time.monotonic() - started, slowest


def run(variant: str, args: argparse.Namespace) -> None:
    with connect() as conn:
        build(conn, done=args.done, pending=args.pending, aggregates=args.aggregates,
              closed_rows_index=variant.startswith("closed"), fresh=variant.endswith("fresh"),
              crash=variant.endswith("crash"))
    with connect() as conn:  # a new backend: the catalog as just set, not as cached
        plan = claim_plan(conn, args.limit, args.max_chain)
        before = index_reads(conn)
        claims, seconds, slowest = drain(conn, args.limit, args.max_chain)
    time.sleep(1.0)
    with connect() as conn:
        after = index_reads(conn)
    reads = {name: after[name] - before.get(name, 0) for name in after}
    print(f"== {variant}: {args.pending:,} pending over {args.done:,} done, {claims} claims "
          f"in {seconds:.1f} s (slowest {slowest * 1000:.0f} ms)")
    for name, n in sorted(reads.items()):
        print(f"   {name:32} {n:>14,} index entries read")
    if args.plans:
        print(plan)


def analyze_cost(rows: int) -> None:
    """ANALYZE of an outbox of ``rows`` rows (10% open), cold and warm."""
    with connect() as conn:
        build(conn, done=rows - rows // 10, pending=rows // 10, aggregates=5000,
              closed_rows_index=True, fresh=False)
        size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size(%s::regclass))",
                            [DIALECT.table]).fetchone()
        for attempt in ("first", "second"):
            began = time.monotonic()
            conn.execute(f"ANALYZE {DIALECT.table}")
            print(f"ANALYZE of {rows:,} rows ({size[0] if size else '?'}), {attempt}: "
                  f"{(time.monotonic() - began) * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=VARIANTS, action="append")
    parser.add_argument("--done", type=int, default=20_000, help="default: %(default)s")
    parser.add_argument("--pending", type=int, default=20_000, help="default: %(default)s")
    parser.add_argument("--aggregates", type=int, default=1_000, help="default: %(default)s")
    parser.add_argument("--limit", type=int, default=500, help="default: %(default)s")
    parser.add_argument("--max-chain", type=int, default=100, help="default: %(default)s")
    parser.add_argument("--plans", action="store_true", help="print each first claim's plan")
    parser.add_argument("--analyze-cost", type=int, metavar="ROWS",
                        help="only time ANALYZE of an outbox of ROWS rows")
    args = parser.parse_args()
    ensure_database(DATABASE)
    if args.analyze_cost:
        analyze_cost(args.analyze_cost)
        return
    for variant in args.only or VARIANTS:
        run(variant, args)


if __name__ == "__main__":
    main()
