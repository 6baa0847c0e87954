"""The claim on MariaDB/MySQL reads about the rows it hands out, however deep the
aggregates' backlogs and however long their done history.

Found by a 124,000-event drain over 1,000 aggregates that did not finish in 12 minutes
(each claim took 4 s at 150,000 pending and 500,000 done rows): the fresh-head scan sorted
every pending row, each probed as a head first, because MariaDB does not take
``next_retry_at IS NULL`` as a constant of the claim index's prefix; and each head probe
(an earlier row in status IN (0, 1, 3)) sought on ``aggregate_id`` alone and walked the
aggregate's whole done history. Since then a claim reads a window of fresh rows, oldest
first or bucket by bucket, and names the indexes it reads.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from eventferry_django.models import OutboxEvent, Status
from eventferry_django.store.outbox import OutboxStore
from eventferry_django.store.sql import bind

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "mysql", reason="MariaDB/MySQL's claim"),
]

AGGREGATES = 100
DONE_PER_AGGREGATE = 30
PENDING_PER_AGGREGATE = 5


@pytest.fixture
def deep_outbox() -> None:
    """100 aggregates with 30 done rows each, then 5 pending rows each, interleaved as
    events of many aggregates are; analysed, so the optimizer weighs real statistics."""
    table = connection.ops.quote_name(OutboxEvent._meta.db_table)
    per_aggregate = DONE_PER_AGGREGATE + PENDING_PER_AGGREGATE
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (message_id, topic, aggregate_type, aggregate_id, payload, "
            "headers, status, attempts, processed_at) "
            "WITH RECURSIVE d(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM d WHERE k < 99) "
            "SELECT CONCAT('m-', n), 't', 'a', CAST(n %% %s AS CHAR), '{}', '{}', "
            "IF(n < %s, %s, 0), 0, IF(n < %s, UTC_TIMESTAMP(3), NULL) "
            "FROM (SELECT a.k * 100 + b.k AS n FROM d AS a, d AS b WHERE a.k < %s) AS s "
            "ORDER BY n",
            [AGGREGATES, AGGREGATES * DONE_PER_AGGREGATE, int(Status.DONE),
             AGGREGATES * DONE_PER_AGGREGATE, per_aggregate],
        )
        cursor.execute(f"ANALYZE TABLE {table}")
        cursor.fetchall()


def explain(sql: str, params: list[Any]) -> list[dict[str, Any]]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        columns = [c[0].lower() for c in cursor.description]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def assert_head_probes_seek(plan: list[dict[str, Any]]) -> None:
    """Each probe seeks the open-rows index on (aggregate, status): it reads the first
    entry of one status, never the aggregate's other statuses (its done history)."""
    probes = [row for row in plan if row["table"] == "e"]
    assert len(probes) == 3, plan
    index = OutboxStore().dialect.name.aggregate_index
    for probe in probes:
        assert probe["key"] == index, plan
        assert str(probe["ref"]).endswith(",const"), plan  # aggregate_id and status
        assert "filesort" not in str(probe["extra"]).lower(), plan


def test_the_oldest_first_window_reads_the_claim_index_in_id_order(deep_outbox: None
                                                                  ) -> None:
    # Never the primary key through the done history, and no sort of the fresh rows.
    dialect = OutboxStore().dialect
    sql, params = dialect.claim.oldest_window_sql()  # type: ignore[attr-defined]
    plan = explain(sql, bind(params, window=20))
    assert plan[0]["key"] == dialect.name.claim_index, plan
    assert "filesort" not in str(plan[0]["extra"]).lower(), plan


def test_the_fresh_heads_are_probed_by_key(deep_outbox: None) -> None:
    dialect = OutboxStore().dialect
    ids = list(OutboxEvent.objects.filter(status=Status.PENDING).order_by("id")
               .values_list("id", flat=True)[:20])
    sql, params = dialect.claim.fresh_heads_sql(ids)  # type: ignore[attr-defined]
    plan = explain(sql, bind(params, heads=10))
    assert plan[0]["type"] == "range", plan  # the candidates' keys, nothing else
    assert int(plan[0]["rows"]) <= 20, plan
    assert_head_probes_seek(plan)


def test_a_bucket_window_reads_its_bucket_in_id_order(deep_outbox: None) -> None:
    dialect = OutboxStore().dialect
    sql, params = dialect.claim.bucket_window_sql()  # type: ignore[attr-defined]
    plan = explain(sql.strip("()"), bind(params, bucket=7, window=10))
    assert plan[0]["key"] == dialect.name.bucket_index, plan
    assert "filesort" not in str(plan[0]["extra"]).lower(), plan


def test_a_claim_reads_about_the_rows_it_hands_out(deep_outbox: None) -> None:
    """Index entries read by a claim of 10 heads: a few per head and per row the scan
    passes, nothing for the 3,000 done rows (before: about 5,000)."""

    def reads() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
            return sum(int(value) for _, value in cursor.fetchall())

    store = OutboxStore(max_chain=1)
    before = reads()
    claimed = store.claim(10)
    read = reads() - before
    assert len(claimed) == 10
    assert read < 500, read


def test_a_fill_reads_the_rows_without_a_bucket_and_seeks_each_aggregate(
    deep_outbox: None,
) -> None:
    """Rows written without a bucket get theirs (store/bucket_fill.py): the
    fill's read walks the bucket index's NULL range in id order, and each UPDATE seeks
    its aggregates' open rows, never their done history."""
    dialect = OutboxStore().dialect
    unbucketed = explain(*dialect.bucket_fill.unbucketed_sql())
    assert unbucketed[0]["key"] == dialect.name.bucket_index, unbucketed
    assert "filesort" not in str(unbucketed[0]["extra"]).lower(), unbucketed
    fill = explain(*dialect.bucket_fill.fill_sql([("7", 214), ("8", 3)]))
    assert fill[0]["key"] == dialect.name.aggregate_index, fill
