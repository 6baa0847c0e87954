"""The purge's batch DELETE on MariaDB/MySQL walks the retention index and stops at its
limit; with ORDER BY id alone it sorted every old row again for each batch (found by
benchmarks/scale.py: 1,200 rows/s against 7,600 with the index's order)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from eventferry_django.models import OutboxEvent, Status
from eventferry_django.store.outbox import OutboxStore

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "mysql", reason="MariaDB/MySQL's DELETE ... LIMIT"),
]


def test_the_purge_batch_needs_no_sort() -> None:
    table = connection.ops.quote_name(OutboxEvent._meta.db_table)
    with connection.cursor() as cursor:
        # Enough old done rows, and some open ones, for the optimizer to weigh its plans.
        cursor.execute(
            f"INSERT INTO {table} (message_id, topic, aggregate_type, aggregate_id, payload, "
            "headers, status, attempts, created_at, processed_at) "
            # 100 x 50 rows: servers cap a recursive CTE at 1,000 iterations.
            "WITH RECURSIVE d(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM d WHERE k < 99) "
            "SELECT CONCAT('m-', n), 't', 'a', CAST(n %% 100 AS CHAR), '{}', '{}', "
            "IF(n %% 10 = 0, 0, %s), 0, UTC_TIMESTAMP(3) - INTERVAL 2 DAY, "
            "IF(n %% 10 = 0, NULL, UTC_TIMESTAMP(3) - INTERVAL 2 DAY) "
            "FROM (SELECT a.k * 100 + b.k AS n FROM d AS a, d AS b WHERE a.k < 50) AS s",
            [int(Status.DONE)],
        )
        cursor.execute(f"ANALYZE TABLE {table}")
        cursor.fetchall()
    with CaptureQueriesContext(connection) as queries:
        OutboxStore().purge(timezone.now() - dt.timedelta(days=1), batch_size=1000,
                            max_rows=1000)
    delete = next(q["sql"] for q in queries.captured_queries if q["sql"].startswith("DELETE"))
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {delete}")
        columns = [c[0].lower() for c in cursor.description]
        plan = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    assert "filesort" not in str(plan[0]["extra"]).lower(), plan
    assert plan[0]["key"] == "IX_outbox_done_processed_at", plan
