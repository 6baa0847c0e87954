"""Chains on a real database: a claim hands out an aggregate's head and the open rows
that follow it, in id order, up to MAX_CHAIN, and never a later row while an earlier open
row is held elsewhere or waits for its retry time."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import override_settings
from django.utils import timezone
from prometheus_client import REGISTRY

from eventferry_django import NewEvent, metrics, publish_events
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.publishers.base import (
    OutboundMessage,
    Outcome,
    Publisher,
    PublishResult,
)
from eventferry_django.relay import Relay, RelayConfig
from eventferry_django.relay.planner import refused_heads_alone
from eventferry_django.store.outbox import ClaimedEvent, Failure, OutboxStore
from eventferry_django.store.sql import bind, chain_share, chain_share_sql

from .engine_gaps import babelfish_gap

pytestmark = pytest.mark.django_db(transaction=True)


def publish(*aggregates: str) -> list[str]:
    with transaction.atomic():
        return publish_events([NewEvent("t", {"n": i}, "agg", a)
                               for i, a in enumerate(aggregates)])


def claimed(events: list[ClaimedEvent]) -> list[tuple[str, int]]:
    return [(e.message.aggregate_id, json.loads(e.message.payload)["n"]) for e in events]


def test_a_claim_hands_out_each_head_and_the_rows_after_it_up_to_max_chain() -> None:
    publish("a", "a", "b", "a", "a", "b", "c")
    store = OutboxStore(max_chain=3)
    assert claimed(store.claim(100, lease_timeout=60)) == [
        ("a", 0), ("a", 1), ("b", 2), ("a", 3), ("b", 5), ("c", 6),
    ]
    # The rest of "a" waits behind the rows just claimed.
    assert store.claim(100, lease_timeout=60) == []


def test_the_limit_keeps_a_prefix_of_every_chain_in_id_order() -> None:
    publish("a", "b", "a", "b", "a", "b")
    events = OutboxStore(max_chain=10).claim(3, lease_timeout=60)
    assert claimed(events) == [("a", 0), ("b", 1), ("a", 2)]


def test_max_chain_1_hands_out_heads_only() -> None:
    publish("a", "a", "b", "b")
    assert claimed(OutboxStore(max_chain=1).claim(100, lease_timeout=60)) == [("a", 0), ("b", 2)]


def test_a_chain_stops_at_a_row_waiting_for_its_retry_time() -> None:
    publish("a", "a", "a", "a")
    store = OutboxStore(max_chain=10)
    first = store.claim(100, lease_timeout=60)
    assert len(first) == 4
    # Row 1 refused (retry in a minute), the others confirmed: an order break.
    store.settle([first[0], first[2], first[3]], [Failure(first[1], "nack", delay=60)])
    publish("a", "a")
    # The new rows wait behind the failed one, although they are pending and fresh.
    assert store.claim(100, lease_timeout=60) == []
    OutboxEvent.objects.filter(status=Status.FAILED).update(
        next_retry_at=timezone.now() - dt.timedelta(seconds=1))
    # Due now: it heads a chain again, with the rows behind it.
    assert claimed(store.claim(100, lease_timeout=60)) == [("a", 1), ("a", 0), ("a", 1)]


def test_a_chain_stops_where_a_row_is_held_by_a_live_lease() -> None:
    publish("a", "a", "a")
    store = OutboxStore(max_chain=10)
    events = store.claim(100, lease_timeout=60)
    # A redrive-like edit puts the head back to pending while rows behind it are held.
    OutboxEvent.objects.filter(id=events[0].id).update(status=Status.PENDING, claimed_at=None)
    assert claimed(store.claim(100, lease_timeout=60)) == [("a", 0)]


def test_an_expired_chain_comes_back_whole_from_its_first_row() -> None:
    publish("a", "a", "a", "b")
    store = OutboxStore(max_chain=10)
    assert len(store.claim(100, lease_timeout=60)) == 4
    OutboxEvent.objects.update(claimed_at=timezone.now() - dt.timedelta(minutes=5))
    publish("a")
    again = store.claim(100, lease_timeout=60)
    assert claimed(again) == [("a", 0), ("a", 1), ("a", 2), ("b", 3), ("a", 0)]
    # Taking back an expired lease costs an attempt; the new row had none to lose.
    assert [e.message.attempts for e in again] == [1, 1, 1, 1, 0]


LOCK_HEAD = {
    "postgresql": "SELECT id FROM {table} WHERE id = %s FOR UPDATE",
    "mysql": "SELECT id FROM {table} WHERE id = %s FOR UPDATE",
    "microsoft": "SELECT id FROM {table} WITH (UPDLOCK, ROWLOCK) WHERE id = %s",
}


@pytest.fixture
def head_held(second_connection: BaseDatabaseWrapper) -> Iterator[Any]:
    """Locks a row from another connection, in a transaction left open, as a competing
    claim does between finding its heads and committing."""
    if connection.vendor not in LOCK_HEAD:
        pytest.skip("SQLite has one writer at a time: no claim can hold a row mid-way")
    table = OutboxStore().dialect.table
    second_connection.set_autocommit(False)

    def hold(row_id: int) -> None:
        with second_connection.cursor() as cursor:
            cursor.execute(LOCK_HEAD[connection.vendor].format(table=table), [row_id])
            cursor.fetchall()

    try:
        yield hold
    finally:
        second_connection.rollback()
        second_connection.set_autocommit(True)


@babelfish_gap("locking-hints-ignored", "the competitor's UPDLOCK takes no lock there, so READPAST skips nothing and the head is claimed")
def test_a_competitor_holding_the_head_gets_the_aggregate_no_chain_here(head_held: Any) -> None:
    ids = list(OutboxEvent.objects.filter(message_id__in=publish("a", "a", "a", "b"))
               .order_by("id").values_list("id", flat=True))
    head_held(ids[0])
    # The locked head is skipped, and no row behind it counts as a head: its committed
    # state is still open. Only "b" can be claimed.
    assert claimed(OutboxStore(max_chain=10).claim(100, lease_timeout=60)) == [("b", 3)]


class RecordingPublisher(Publisher):
    """Answers OK, except RETRY for the payloads listed; records each call's messages."""

    def __init__(self, refuse: set[int] | None = None) -> None:
        super().__init__()
        self.refuse = refuse or set()
        self.calls: list[list[OutboundMessage]] = []

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        self.calls.append(list(messages))
        return [PublishResult(Outcome.RETRY, "nack") if json.loads(m.payload)["n"] in self.refuse
                else PublishResult.ok() for m in messages]


def chained_relay(publisher: Publisher, **config: Any) -> Relay:
    options: dict[str, Any] = {"batch_size": 100, "until_empty": True, "batches_in_flight": 2}
    return Relay(RelayConfig(**{**options, **config}), publisher=publisher,
                 store=OutboxStore(max_chain=10))


def test_a_claim_split_across_batches_in_flight_keeps_each_chain_in_one_call() -> None:
    publish(*"abaaaacdef")  # cut in two by count, "a" would straddle both calls
    publisher = RecordingPublisher()
    chained_relay(publisher).run()
    assert len(publisher.calls) == 2
    calls_of = {a: [i for i, call in enumerate(publisher.calls)
                    if any(m.aggregate_id == a for m in call)] for a in "abcdef"}
    assert all(len(calls) == 1 for calls in calls_of.values()), calls_of
    a_chain = [json.loads(m.payload)["n"] for call in publisher.calls for m in call
               if m.aggregate_id == "a"]
    assert a_chain == [0, 2, 3, 4, 5]


def order_breaks(topic: str) -> float:
    assert metrics.available()
    return REGISTRY.get_sample_value("eventferry_order_breaks_total", {"topic": topic}) or 0.0


def test_a_refused_row_mid_chain_is_one_order_break_and_the_rest_is_done(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ids = publish(*"aaaaa")
    rows = dict(OutboxEvent.objects.values_list("message_id", "id"))
    before = order_breaks("t")
    with caplog.at_level(logging.WARNING, "eventferry_django.relay"):
        chained_relay(RecordingPublisher(refuse={2}), once=True).run()
    assert order_breaks("t") == before + 1
    assert list(OutboxEvent.objects.order_by("id").values_list("status", "attempts")) == [
        (Status.DONE, 0), (Status.DONE, 0), (Status.FAILED, 1), (Status.DONE, 0),
        (Status.DONE, 0)]
    assert (f"order break in aggregate agg/a: outbox row(s) [{rows[ids[2]]}] refused, later "
            f"row(s) [{rows[ids[3]]}, {rows[ids[4]]}]") in caplog.text


def test_only_a_head_refused_more_often_than_its_chain_goes_out_alone() -> None:
    publish("a", "a", "a", "b", "b")
    store = OutboxStore(max_chain=10)
    first = store.claim(100, lease_timeout=60)
    # Every lease expired (a dead relay): the chains come back whole, one attempt each.
    OutboxEvent.objects.update(claimed_at=timezone.now() - dt.timedelta(minutes=5))
    again = store.claim(100, lease_timeout=60)
    assert refused_heads_alone(again) == (again, [])
    # The broker refused a's head: its retry goes out alone, the rows behind it wait.
    a_head, *a_rest = [e for e in again if e.message.aggregate_id == "a"]
    store.settle([*a_rest, *[e for e in again if e.message.aggregate_id == "b"]],
                 [Failure(a_head, "nack", delay=0.001)])
    publish("a", "a")
    OutboxEvent.objects.filter(status=Status.FAILED).update(
        next_retry_at=timezone.now() - dt.timedelta(seconds=1))
    retry = store.claim(100, lease_timeout=60)
    assert [e.id for e in retry] == [first[0].id, *(e.id for e in retry[1:])] and len(retry) == 3
    assert refused_heads_alone(retry) == ([retry[0]], retry[1:])


def test_rows_behind_a_refused_head_wait_until_it_is_dead_then_flow() -> None:
    publish("a")
    refusing = RecordingPublisher(refuse={0})
    chained_relay(refusing, once=True).run()  # the head alone, refused
    with transaction.atomic():
        publish_events([NewEvent("t", {"n": n}, "agg", "a") for n in (1, 2, 3)])
    before = order_breaks("t")
    with override_settings(EVENTFERRY={"BACKOFF": {"BASE": 0.01, "MAX": 0.02, "JITTER": 0.0}}):
        # Four more refusals bury the head (MAX_ATTEMPTS 5); then the three behind it.
        stats = chained_relay(refusing, until_empty=False, max_events=7).run()
    sent = [[json.loads(m.payload)["n"] for m in call] for call in refusing.calls]
    assert sent == [[0]] * 5 + [[1, 2, 3]]
    assert (stats.published, stats.retried, stats.dead) == (3, 3, 1)
    assert order_breaks("t") == before
    assert list(OutboxEvent.objects.order_by("id").values_list("status", "attempts")) == [
        (Status.DEAD, 5), (Status.DONE, 0), (Status.DONE, 0), (Status.DONE, 0)]


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_the_claims_sql_share_is_the_python_chain_share() -> None:
    """MariaDB computes a chain's share in Python, PostgreSQL in the claim: the same
    formula, evaluated by the server here for a grid of claims."""
    grid = [(chain, limit, heads, rank) for chain in (1, 2, 7, 100)
            for limit in (1, 9, 100, 500) for heads in (1, 3, 64, 500) if heads <= limit
            for rank in sorted({1, 2, heads // 2 + 1, heads}) if rank <= heads]
    share_sql, slots = chain_share_sql("h.r", "h.n", least=True)
    with connection.cursor() as cursor:
        for max_chain, limit, heads, rank in grid:
            cursor.execute(f"SELECT {share_sql} FROM (SELECT %s AS r, %s AS n) AS h",
                           [*bind(slots, max_chain=max_chain, limit=limit), rank, heads])
            [(in_sql,)] = cursor.fetchall()
            assert in_sql == chain_share(max_chain, limit, heads, rank), (
                max_chain, limit, heads, rank)


def test_the_chain_shares_fill_the_batch_and_favour_the_older_heads() -> None:
    for limit, heads in ((500, 495), (500, 300), (500, 1), (9, 3), (100, 64)):
        shares = [chain_share(500, limit, heads, rank) for rank in range(1, heads + 1)]
        assert heads + sum(shares) == limit, (limit, heads)
        assert shares == sorted(shares, reverse=True) and shares[0] - shares[-1] <= 1
    # Never past MAX_CHAIN - 1, whatever the batch leaves.
    assert [chain_share(3, 500, 2, rank) for rank in (1, 2)] == [2, 2]
