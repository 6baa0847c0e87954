"""The one-write design's claim (docs/design/one-write.md, ``ClaimSql.read``): the rows
the claim would take, read and handed out with nothing written, passing over the
aggregates in flight. Not sent by the relay yet; measured on PostgreSQL by
``benchmarks/database_cost.py --one-write``."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction

from eventferry_django import NewEvent, publish_events
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.store.claim import ClaimRequest
from eventferry_django.store.outbox import OutboxStore

pytestmark = pytest.mark.django_db(transaction=True)


def publish(*aggregates: str) -> None:
    with transaction.atomic():
        publish_events([NewEvent("t", {"n": n}, "agg", a) for n, a in enumerate(aggregates)])


def read_claim(request: ClaimRequest, in_flight: list[str] | None = None) -> list[tuple[Any, ...]]:
    with transaction.atomic(), connection.cursor() as cursor:
        return sorted(OutboxStore().dialect.claim.read(cursor, request, in_flight or []))


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


@pytest.mark.parametrize("buckets", [None, tuple(range(256))])
def test_an_aggregate_in_flight_is_passed_over_whole(buckets: tuple[int, ...] | None) -> None:
    publish("a", "a", "b", "b")
    _, _, b_head, b_next = OutboxEvent.objects.order_by("id").values_list("id", flat=True)
    rows = read_claim(ClaimRequest(10, 60, max_chain=10, buckets=buckets), in_flight=["a"])
    assert aggregates_and_ids(rows) == [("b", b_head), ("b", b_next)]


def test_a_window_passes_over_the_aggregates_in_flight_at_its_front() -> None:
    # A window of two rows per head asked for: the four rows of the aggregates in flight
    # come first, and a window that counted them would see no other.
    publish("a", "a", "b", "b", "c", "d")
    *_, c, d = OutboxEvent.objects.order_by("id").values_list("id", flat=True)
    for buckets in (None, tuple(range(256))):
        rows = read_claim(ClaimRequest(2, 60, buckets=buckets), in_flight=["a", "b"])
        assert aggregates_and_ids(rows) == [("c", c), ("d", d)], buckets


def test_a_chain_stops_at_a_row_waiting_for_its_retry() -> None:
    publish("a", "a", "a")
    first, second, _ = OutboxEvent.objects.order_by("id").values_list("id", flat=True)
    OutboxEvent.objects.filter(id=second).update(status=Status.FAILED,
                                                 next_retry_at="2999-01-01T00:00:00Z")
    assert aggregates_and_ids(read_claim(ClaimRequest(10, 60, max_chain=10))) == [
        ("a", first)]


def test_a_retry_in_flight_is_not_handed_out_again() -> None:
    publish("a", "b")
    a, b = OutboxEvent.objects.order_by("id").values_list("id", flat=True)
    OutboxEvent.objects.filter(id=a).update(status=Status.FAILED, attempts=1)
    assert aggregates_and_ids(read_claim(ClaimRequest(10, 60))) == [("a", a), ("b", b)]
    assert aggregates_and_ids(read_claim(ClaimRequest(10, 60), in_flight=["a"])) == [("b", b)]
