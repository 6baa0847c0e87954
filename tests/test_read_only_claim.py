"""The claim (``ClaimSql.run``, docs/design/one-write.md): the rows of the relay's own
buckets, read and handed out with nothing written, passing over the aggregates in
flight."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import Q

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
        return sorted(OutboxStore().dialect.claim.run(cursor, request, in_flight or []))


def aggregates_and_ids(rows: list[tuple[Any, ...]]) -> list[tuple[str, int]]:
    return [(row[4], row[0]) for row in rows]


@pytest.mark.parametrize("buckets", [None, tuple(range(256))])
def test_it_hands_out_heads_and_chains_and_writes_nothing(buckets: tuple[int, ...] | None
                                                          ) -> None:
    publish("a", "a", "b", "c", "b", "a")
    ids = list(OutboxEvent.objects.order_by("id").values_list("id", flat=True))
    rows = read_claim(ClaimRequest(10, max_chain=10, buckets=buckets))
    assert aggregates_and_ids(rows) == [("a", ids[0]), ("a", ids[1]), ("b", ids[2]),
                                        ("c", ids[3]), ("b", ids[4]), ("a", ids[5])]
    assert set(OutboxEvent.objects.values_list("status", "attempts")) == {(Status.PENDING, 0)}
    # Read again, the same rows: nothing marks them taken.
    assert read_claim(ClaimRequest(10, max_chain=10, buckets=buckets)) == rows


@pytest.mark.parametrize("buckets", [None, tuple(range(256))])
def test_an_aggregate_in_flight_is_passed_over_whole(buckets: tuple[int, ...] | None) -> None:
    publish("a", "a", "b", "b")
    _, _, b_head, b_next = OutboxEvent.objects.order_by("id").values_list("id", flat=True)
    rows = read_claim(ClaimRequest(10, max_chain=10, buckets=buckets), in_flight=["a"])
    assert aggregates_and_ids(rows) == [("b", b_head), ("b", b_next)]


def test_a_window_passes_over_the_rows_in_flight_at_its_front() -> None:
    # A window of two rows per head asked for: the four rows of the aggregates in flight
    # come first, and a window that did not pass over them would see no other.
    publish("a", "a", "b", "b", "c", "d")
    *_, c, d = OutboxEvent.objects.order_by("id").values_list("id", flat=True)
    if connection.vendor != "sqlite":  # SQLite's claim reads no window
        assert read_claim(ClaimRequest(2), in_flight=["a", "b"]) == []
    for buckets in (None, tuple(range(256))):
        rows = read_claim(ClaimRequest(2, buckets=buckets, passing=4), in_flight=["a", "b"])
        assert aggregates_and_ids(rows) == [("c", c), ("d", d)], buckets


def test_a_chain_stops_at_a_row_waiting_for_its_retry() -> None:
    publish("a", "a", "a")
    first, second, _ = OutboxEvent.objects.order_by("id").values_list("id", flat=True)
    OutboxEvent.objects.filter(id=second).update(status=Status.FAILED,
                                                 next_retry_at="2999-01-01T00:00:00Z")
    assert aggregates_and_ids(read_claim(ClaimRequest(10, max_chain=10))) == [
        ("a", first)]


def test_a_retry_in_flight_is_not_handed_out_again() -> None:
    publish("a", "b")
    a, b = OutboxEvent.objects.order_by("id").values_list("id", flat=True)
    OutboxEvent.objects.filter(id=a).update(status=Status.FAILED, attempts=1)
    assert aggregates_and_ids(read_claim(ClaimRequest(10))) == [("a", a), ("b", b)]
    assert aggregates_and_ids(read_claim(ClaimRequest(10), in_flight=["a"])) == [("b", b)]


@pytest.mark.parametrize("max_chain", [1, 10])
def test_bucket_by_bucket_only_the_claims_buckets_are_read(max_chain: int) -> None:
    """Bucket by bucket, a claim hands out neither rows without a bucket (the bucket
    filler gives them theirs) nor overdue rows of other buckets (their relays' to
    claim), and a row of its bucket behind one without a bucket waits for it; oldest
    first (a relay that holds every bucket) it hands out all of them."""
    publish("mine", "unbucketed", "other-retry", "other-due", "my-retry", "my-due",
            "half", "half")
    rows = list(OutboxEvent.objects.order_by("id").values_list("aggregate_id", "id"))
    half_first, half_second = (row_id for aggregate, row_id in rows if aggregate == "half")
    mine, other = 7, 8
    OutboxEvent.objects.filter(aggregate_id__in=["mine", "my-retry", "my-due", "half"]).update(
        bucket=mine)
    OutboxEvent.objects.filter(aggregate_id__in=["other-retry", "other-due"]).update(
        bucket=other)
    OutboxEvent.objects.filter(Q(aggregate_id="unbucketed") | Q(id=half_first)).update(
        bucket=None)
    OutboxEvent.objects.filter(aggregate_id__in=["other-retry", "my-retry"]).update(
        status=Status.FAILED, attempts=1, next_retry_at="2000-01-01T00:00:00Z")
    OutboxEvent.objects.filter(aggregate_id__in=["other-due", "my-due"]).update(
        next_retry_at="2000-01-01T00:00:00Z")

    by_bucket = read_claim(ClaimRequest(100, max_chain=max_chain, buckets=(mine,)))
    assert aggregates_and_ids(by_bucket) == [
        row for row in rows if row[0] in ("mine", "my-retry", "my-due")]
    oldest_first = read_claim(ClaimRequest(100, max_chain=max_chain))
    assert aggregates_and_ids(oldest_first) == (
        rows if max_chain > 1 else [row for row in rows if row[1] != half_second])


@pytest.mark.parametrize("hindrance", ["failed", "scheduled", "no bucket"])
def test_a_lone_row_outside_the_windows_still_holds_its_aggregate_back(hindrance: str
                                                                      ) -> None:
    """A window is the front of its fresh rows, so only a row outside it can come before
    the first row of an aggregate there: PostgreSQL probes the heads only while there is
    any. One such row, the only one in the outbox, still holds its aggregate back."""
    publish("a", "a", "b")
    first, _, b = OutboxEvent.objects.order_by("id").values_list("id", flat=True)
    row = OutboxEvent.objects.filter(id=first)
    all_buckets = tuple(range(256))
    if hindrance == "failed":
        row.update(status=Status.FAILED, attempts=1, next_retry_at="2999-01-01T00:00:00Z")
    elif hindrance == "scheduled":
        row.update(next_retry_at="2999-01-01T00:00:00Z")
    else:
        row.update(bucket=None)  # oldest first, it is in the window: it is the head
    for buckets in ((all_buckets,) if hindrance == "no bucket" else (None, all_buckets)):
        claimed = read_claim(ClaimRequest(10, max_chain=10, buckets=buckets))
        assert aggregates_and_ids(claimed) == [("b", b)], buckets
