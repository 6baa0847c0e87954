"""Chains on a real database: a claim hands out an aggregate's head and the open rows
that follow it, in id order, up to MAX_CHAIN, and never a later row while an earlier open
row is in flight or waits for its retry time."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Sequence
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone
from prometheus_client import REGISTRY

from eventferry_django import NewEvent, metrics, publish_events
from eventferry_django.contract import bucket_of
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.publishers.base import (
    OutboundMessage,
    Outcome,
    Publisher,
    PublishResult,
)
from eventferry_django.relay import Relay, RelayConfig
from eventferry_django.relay.planner import refused_heads_alone
from eventferry_django.store.bucket_leases import BucketLeases
from eventferry_django.store.in_flight_journal import InFlightJournal
from eventferry_django.store.outbox import ClaimedEvent, Failure, OutboxStore, Settlement
from eventferry_django.store.sql import bind, chain_share, chain_share_sql

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
    assert claimed(store.claim(100)) == [
        ("a", 0), ("a", 1), ("b", 2), ("a", 3), ("b", 5), ("c", 6),
    ]
    # The rest of "a" waits behind the rows in flight.
    assert store.take(store.request(100), in_flight=["a", "b", "c"]) == []


def test_the_limit_keeps_a_prefix_of_every_chain_in_id_order() -> None:
    publish("a", "b", "a", "b", "a", "b")
    events = OutboxStore(max_chain=10).claim(3)
    assert claimed(events) == [("a", 0), ("b", 1), ("a", 2)]


def test_max_chain_1_hands_out_heads_only() -> None:
    publish("a", "a", "b", "b")
    assert claimed(OutboxStore(max_chain=1).claim(100)) == [("a", 0), ("b", 2)]


def test_a_chain_stops_at_a_row_waiting_for_its_retry_time() -> None:
    publish("a", "a", "a", "a")
    store = OutboxStore(max_chain=10)
    first = store.claim(100)
    assert len(first) == 4
    # Row 1 refused (retry in a minute), the others confirmed: an order break.
    store.settle(Settlement(first[0].batch, delivered=[first[0], first[2], first[3]],
                            failures=[Failure(first[1], "nack", delay=60)]))
    publish("a", "a")
    # The new rows wait behind the failed one, although they are pending and fresh.
    assert store.claim(100) == []
    OutboxEvent.objects.filter(status=Status.FAILED).update(
        next_retry_at=timezone.now() - dt.timedelta(seconds=1))
    # Due now: it heads a chain again, with the rows behind it.
    assert claimed(store.claim(100)) == [("a", 1), ("a", 0), ("a", 1)]


def test_a_chain_taken_over_comes_back_whole_from_its_first_row() -> None:
    publish("a", "a", "a", "b")
    stopped, taker = OutboxStore(max_chain=10), OutboxStore(max_chain=10)
    assert len(stopped.claim(100)) == 4
    # The relay stopped; another takes its buckets, sweeping its batch.
    take_over(taker, "a", "b")
    publish("a")
    again = taker.claim(100)
    assert claimed(again) == [("a", 0), ("a", 1), ("a", 2), ("b", 3), ("a", 0)]
    # A takeover costs an attempt; the new row had none to lose.
    assert [e.message.attempts for e in again] == [1, 1, 1, 1, 0]


def take_over(taker: OutboxStore, *aggregates: str) -> None:
    """``taker`` takes the buckets of ``aggregates``, as a relay taking over from one that
    stopped does: the sweep takes their rows out of the other relays' batches."""
    BucketLeases().take(taker.instance, {bucket_of(a) for a in aggregates}, 60,
                        then=lambda cursor, taken: taker.journal.sweep(
                            cursor, taker.instance, taken))


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


class JournalWatchingPublisher(RecordingPublisher):
    """Records, at each call, the aggregates of every batch then in flight, by batch (the
    journal of batches in flight, read on the publishing thread's own connection)."""

    def __init__(self) -> None:
        super().__init__()
        self.in_flight: list[list[set[str]]] = []

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        entries = InFlightJournal().entries()
        aggregate_of = dict(OutboxEvent.objects.filter(
            id__in=[i for entry in entries for i in entry.ids]).values_list("id", "aggregate_id"))
        self.in_flight.append([{aggregate_of[i] for i in entry.ids} for entry in entries])
        connection.close()  # the publishing thread's own, which nothing else closes
        return super().publish(messages)


def test_batches_in_flight_never_share_an_aggregate() -> None:
    publish(*"abaaaacdefaabc")
    publisher = JournalWatchingPublisher()
    chained_relay(publisher, batch_size=5).run()
    # Each claim passes over the aggregates of the other batch in flight; which rows a
    # claim of five takes (heads first, or chains) is the vendor's.
    assert max(len(batches) for batches in publisher.in_flight) == 2
    for batches in publisher.in_flight:
        for n, aggregates in enumerate(batches):
            assert not aggregates & set().union(*batches[n + 1:]), publisher.in_flight
    sent = [(m.aggregate_id, json.loads(m.payload)["n"]) for call in publisher.calls
            for m in call]
    assert sorted(sent, key=lambda an: an[1]) == [(a, n) for n, a in enumerate("abaaaacdefaabc")]
    for aggregate in "abcdef":
        ns = [n for a, n in sent if a == aggregate]
        assert ns == sorted(ns), (aggregate, sent)


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
    stopped, store = OutboxStore(max_chain=10), OutboxStore(max_chain=10)
    first = stopped.claim(100)
    # Taken over from a relay that stopped: the chains come back whole, one attempt each.
    take_over(store, "a", "b")
    again = store.claim(100)
    assert refused_heads_alone(again) == (again, [])
    # The broker refused a's head: its retry goes out alone, the rows behind it wait.
    a_head, *a_rest = [e for e in again if e.message.aggregate_id == "a"]
    store.settle(Settlement(again[0].batch, delivered=[
        *a_rest, *[e for e in again if e.message.aggregate_id == "b"]],
        failures=[Failure(a_head, "nack", delay=0.001)]))
    publish("a", "a")
    OutboxEvent.objects.filter(status=Status.FAILED).update(
        next_retry_at=timezone.now() - dt.timedelta(seconds=1))
    retry = store.claim(100)
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
