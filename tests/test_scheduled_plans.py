"""Events scheduled days ahead cost the claim and the claimable-age probes nothing: the
claim index ``(status, next_retry_at, id)`` keeps them past the end of every range those
scans read. Measured as the rows the scans read with 20,000 scheduled rows before the
claimable ones (PostgreSQL: ``EXPLAIN ANALYZE``; MariaDB: the handler reads)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction

from eventferry_django.models import OutboxEvent
from eventferry_django.store.claim import ClaimRequest
from eventferry_django.store.outbox import OutboxStore
from eventferry_django.store.sql import bind

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor not in ("postgresql", "mysql"),
                       reason="the plans of PostgreSQL and MariaDB/MySQL"),
]

SCHEDULED = 20_000
FRESH = 20


@pytest.fixture
def scheduled_outbox() -> Iterator[None]:
    """20,000 rows scheduled days ahead (each its own aggregate, so each a head), then
    20 fresh rows; analysed, so the planner weighs real statistics. Emptied and analysed
    again afterwards: statistics outlive the rows, and the plans of later tests would
    follow these."""
    store = OutboxStore()
    table = store.dialect.table
    days_ahead = store.dialect.ops.now_plus_sql()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            series = "FROM generate_series(1, %s) AS n"
        else:
            series = ("FROM (SELECT a.seq * 1000 + b.seq + 1 AS n FROM seq_0_to_999 AS a, "
                      "seq_0_to_999 AS b) AS s WHERE n <= %s")
        for prefix, count, retry_at in (("s", SCHEDULED, days_ahead), ("f", FRESH, "NULL")):
            params = [store.dialect.ops.offset_param(3 * 86_400_000)] if retry_at != "NULL" else []
            cursor.execute(
                f"INSERT INTO {table} (message_id, topic, aggregate_type, aggregate_id, "
                f"payload, headers, next_retry_at) SELECT CONCAT('{prefix}-', n), 't', 'a', "
                f"CONCAT('{prefix}-', n), '{{}}', '{{}}', {retry_at} {series} ORDER BY n",
                [*params, count],
            )
        analyze(cursor, table)
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table}")
        analyze(cursor, table)


def analyze(cursor: Any, table: str) -> None:
    if connection.vendor == "mysql":
        cursor.execute(f"ANALYZE TABLE {table}")
        cursor.fetchall()
    else:
        cursor.execute(f"ANALYZE {table}")


def rows_read(sql: str, params: list[Any]) -> int:
    """Rows the statement read from the outbox (index entries included), all plan nodes
    together."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute("FLUSH STATUS")
            cursor.execute(sql, params)
            cursor.fetchall()
            cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
            read = sum(int(value) for _, value in cursor.fetchall())
        else:
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
            plan = cursor.fetchone()[0]
            read = _pg_rows(plan if isinstance(plan, list) else json.loads(plan))
        transaction.set_rollback(True)  # the claim's UPDATE, undone
    return read


def _pg_rows(node: Any) -> int:
    if isinstance(node, list):
        return sum(_pg_rows(n) for n in node)
    if not isinstance(node, dict):
        return 0
    own = 0
    if "Relation Name" in node:
        loops = node.get("Actual Loops", 1)
        own = (node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
               + node.get("Rows Removed by Index Recheck", 0)) * loops
    return own + sum(_pg_rows(v) for k, v in node.items() if k in ("Plan", "Plans"))


def test_the_claim_reads_none_of_the_rows_scheduled_ahead(scheduled_outbox: None) -> None:
    dialect = OutboxStore().dialect
    slots = dialect.claim.slots(ClaimRequest(10))
    if connection.vendor == "postgresql":
        sql, params = dialect.claim.claim_sql()  # type: ignore[attr-defined]
        read = rows_read(sql, bind(params, **slots))
    else:
        claim = dialect.claim
        read = sum(rows_read(sql, bind(params, **slots))
                   for sql, params in (claim.oldest_window_sql(),  # type: ignore[attr-defined]
                                       claim.overdue_heads_sql()))  # type: ignore[attr-defined]
    assert read < 500, read
    claimed = OutboxStore().claim(10)
    assert [event.message.message_id for event in claimed] == [f"f-{n}" for n in range(1, 11)]


def test_the_claimable_probes_read_none_of_them_either(scheduled_outbox: None) -> None:
    dialect = OutboxStore().dialect
    for kind, (sql, params) in dialect.claimable.probes().items():
        read = rows_read(sql, bind(params))
        assert read < 500, (kind, read)
    assert OutboxEvent.objects.filter(next_retry_at__isnull=False).count() == SCHEDULED
