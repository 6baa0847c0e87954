"""The one-write design's claim on PostgreSQL (docs/design/one-write.md): the rows the
claim would take, read and handed out with nothing written, passing over the
aggregates whose first rows are in flight. Not sent by the relay yet; measured by
``benchmarks/database_cost.py --one-write``."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction

from eventferry_django import NewEvent, publish_events
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.store.claim import ClaimRequest
from eventferry_django.store.outbox import OutboxStore
from eventferry_django.store.sql import bind

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif("connection.vendor != 'postgresql'",
                       reason="the read-only claim is written for PostgreSQL first"),
]


def publish(*aggregates: str) -> None:
    with transaction.atomic():
        publish_events([NewEvent("t", {"n": n}, "agg", a) for n, a in enumerate(aggregates)])


def read_claim(request: ClaimRequest, in_flight: list[int] | None = None) -> list[tuple[Any, ...]]:
    claim = OutboxStore().dialect.claim
    sql, params = claim.claim_sql(by_bucket=request.buckets is not None,
                                  read_only=True)
    with connection.cursor() as cursor:
        cursor.execute(sql, bind(params, **claim.slots(request), in_flight=in_flight or []))
        return sorted(cursor.fetchall())


def aggregates_and_ids(rows: list[tuple[Any, ...]]) -> list[tuple[str, int]]:
    return [(row[4], row[0]) for row in rows]


@pytest.mark.parametrize("buckets", [None, tuple(range(256))])
def test_it_hands_out_heads_and_chains_and_writes_nothing(buckets: tuple[int, ...] | None
                                                          ) -> None:
    publish("a", "a", "b", "c", "b", "a")
    ids = list(OutboxEvent.objects.order_by("id").values_list("id", flat=True))
    rows = read_claim(ClaimRequest(10, 60, max_chain=10, buckets=buckets))
    assert aggregates_and_ids(rows) == [("a", ids[0]), ("a", ids[1]), ("b", ids[2]),
                                        ("c", ids[3]), ("b", ids[4]), ("a", ids[5])]
    assert set(OutboxEvent.objects.values_list("status", "attempts")) == {(Status.PENDING, 0)}
    # Read again, the same rows: nothing marks them taken.
    assert read_claim(ClaimRequest(10, 60, max_chain=10, buckets=buckets)) == rows


def test_an_aggregate_whose_first_row_is_in_flight_is_passed_over_whole() -> None:
    publish("a", "a", "b", "b")
    a_head, _, b_head, b_next = OutboxEvent.objects.order_by("id").values_list("id", flat=True)
    rows = read_claim(ClaimRequest(10, 60, max_chain=10), in_flight=[a_head])
    assert aggregates_and_ids(rows) == [("b", b_head), ("b", b_next)]


def test_a_chain_stops_at_a_row_waiting_for_its_retry() -> None:
    publish("a", "a", "a")
    first, second, _ = OutboxEvent.objects.order_by("id").values_list("id", flat=True)
    OutboxEvent.objects.filter(id=second).update(status=Status.FAILED,
                                                 next_retry_at="2999-01-01T00:00:00Z")
    assert aggregates_and_ids(read_claim(ClaimRequest(10, 60, max_chain=10))) == [
        ("a", first)]
