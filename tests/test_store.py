"""The store's contract operations on a real database: claim, ack, fail, dead, hand-back,
purge, with head-of-aggregate ordering, the journal of batches in flight and its fence."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re

import pytest
from django.db import connection, transaction
from django.utils import timezone

from eventferry_django import NewEvent, publish_events
from eventferry_django.contract import bucket_of
from eventferry_django.exceptions import EventferryError
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.store import settlement_sql
from eventferry_django.store.bucket_leases import BucketLeases
from eventferry_django.store.outbox import ClaimedEvent, Failure, OutboxStore, Settlement
from eventferry_django.store.sql import bind

pytestmark = pytest.mark.django_db(transaction=True)


def publish(*aggregates: str, topic: str = "t") -> list[str]:
    with transaction.atomic():
        return publish_events([NewEvent(topic, {"n": i}, "agg", a) for i, a in enumerate(aggregates)])


def statuses() -> list[tuple[str, int, int]]:
    return list(OutboxEvent.objects.order_by("id").values_list("aggregate_id", "status", "attempts"))


def test_claim_takes_only_the_head_of_each_aggregate() -> None:
    publish("a", "a", "b", "c", "b")
    store = OutboxStore()
    claimed = store.claim(10)
    assert [(e.message.aggregate_id, json.loads(e.message.payload)) for e in claimed] == [
        ("a", {"n": 0}), ("b", {"n": 2}), ("c", {"n": 3}),
    ]
    # The claim wrote nothing to the rows: the next passes over the aggregates in flight.
    assert store.take(store.request(10), in_flight=["a", "b", "c"]) == []
    assert store.settle(Settlement(claimed[0].batch, delivered=claimed)) == (3, [])
    second = store.claim(10)
    assert [(e.message.aggregate_id, json.loads(e.message.payload)) for e in second] == [
        ("a", {"n": 1}), ("b", {"n": 4}),
    ]


def test_a_claim_writes_its_batch_to_the_journal_and_nothing_to_the_rows() -> None:
    with transaction.atomic():
        [message_id] = publish_events([NewEvent("order.paid", {"x": [1, 2]}, "order", "o-1",
                                                headers={"h": "v"}, partition_key="p")])
    store = OutboxStore()
    [event] = store.claim(5)
    m = event.message
    assert (m.message_id, m.topic, m.aggregate_type, m.aggregate_id, m.partition_key) == (
        message_id, "order.paid", "order", "o-1", "p")
    assert m.headers == {"h": "v"} and m.attempts == 0
    assert json.loads(m.payload) == {"x": [1, 2]}
    row = OutboxEvent.objects.get()
    assert row.status == Status.PENDING and row.claimed_at is None
    assert m.created_at == row.created_at  # to the millisecond stored, in UTC
    assert m.created_at.utcoffset() == dt.timedelta(0)
    [entry] = store.journal.entries()
    assert (entry.relay, entry.batch, entry.ids) == (store.instance, event.batch, [event.id])
    # A claim that finds nothing writes no batch.
    assert store.take(store.request(5), in_flight=["o-1"]) == []
    assert len(store.journal.entries()) == 1


def test_claim_limit_is_validated() -> None:
    with pytest.raises(EventferryError, match=r"claim limit must be 1\.\.10,000, got 0"):
        OutboxStore().claim(0)
    with pytest.raises(EventferryError, match=r"got 10001"):
        OutboxStore().claim(10_001)


def test_ack_marks_done_with_processed_at_and_takes_the_batch_out_of_the_journal() -> None:
    publish("a", "b")
    store = OutboxStore()
    claimed = store.claim(10)
    assert store.settle(Settlement(claimed[0].batch, delivered=claimed)) == (2, [])
    assert all(e.status == Status.DONE and e.processed_at for e in OutboxEvent.objects.all())
    assert store.journal.entries() == []
    assert store.claim(10) == []


def test_a_settlement_claims_the_next_batch_in_its_transaction() -> None:
    publish("a", "a", "b")
    store = OutboxStore()
    first = store.claim(10)
    settled, second = store.settle(Settlement(first[0].batch, delivered=first),
                                   claim=store.request(10))
    assert settled == 2 and [e.message.aggregate_id for e in second] == ["a"]
    assert second[0].batch != first[0].batch
    assert [entry.ids for entry in store.journal.entries()] == [[second[0].id]]


def test_failed_row_waits_for_its_retry_time_and_blocks_its_aggregate() -> None:
    publish("a", "a", "b")
    store = OutboxStore()
    first = store.claim(10)
    a_head = next(e for e in first if e.message.aggregate_id == "a")
    b = next(e for e in first if e.message.aggregate_id == "b")
    store.settle(Settlement(a_head.batch, delivered=[b],
                            failures=[Failure(a_head, "broker said no", delay=3600)]))
    assert statuses() == [("a", Status.FAILED, 1), ("a", Status.PENDING, 0), ("b", Status.DONE, 0)]
    row = OutboxEvent.objects.get(id=a_head.id)
    assert row.last_error == "broker said no" and row.next_retry_at is not None
    assert store.claim(10) == []  # not due; the second "a" waits behind it
    # The hour passes: moved back rather than slept, so a slow engine cannot make it due early.
    OutboxEvent.objects.filter(id=a_head.id).update(
        next_retry_at=timezone.now() - dt.timedelta(seconds=1))
    [retry] = store.claim(10)
    assert retry.id == a_head.id and retry.message.attempts == 1


def test_dead_rows_never_block_or_return() -> None:
    publish("a", "a")
    store = OutboxStore()
    [head] = store.claim(10)
    store.settle(Settlement(head.batch, failures=[Failure(head, "poison", dead=True)]))
    row = OutboxEvent.objects.get(id=head.id)
    assert (row.status, row.attempts, row.last_error) == (Status.DEAD, 1, "poison")
    assert row.processed_at is not None
    [next_one] = store.claim(10)
    assert next_one.id != head.id


def test_a_settlement_run_again_changes_nothing_twice() -> None:
    """What a relay does after a database outage that may have lost its last commits
    (relay/recent_settlements.py): the batch is gone from the journal, so the settlement
    covers it whole, and each row is changed only once."""
    publish("a", "b", "c")
    store = OutboxStore()
    a, b, c = store.claim(10)
    settlement = Settlement(a.batch, delivered=[a], failures=[
        Failure(b, "refused", delay=3600), Failure(c, "poison", dead=True)])
    assert store.settle(settlement)[0] == 3
    before = statuses()
    assert store.settle(settlement)[0] == 3
    assert statuses() == before == [("a", Status.DONE, 0), ("b", Status.FAILED, 1),
                                    ("c", Status.DEAD, 1)]


def test_rows_taken_over_by_another_relay_are_not_settled_by_the_one_that_lost_them() -> None:
    publish("a", "b")
    store, taker = OutboxStore(), OutboxStore()
    stale = store.claim(10)
    a = next(e for e in stale if e.message.aggregate_id == "a")
    # The taker takes a's bucket, which sweeps a's row out of the stale relay's batch,
    # counting it an attempt.
    BucketLeases().take(taker.instance, {bucket_of("a")}, 60, then=lambda cursor, taken:
                        taker.journal.sweep(cursor, taker.instance, taken))
    assert store.settle(Settlement(a.batch, delivered=stale))[0] == 1
    assert statuses() == [("a", Status.PENDING, 1), ("b", Status.DONE, 0)]
    assert store.journal.entries() == []
    [fresh] = taker.claim(10, buckets=(bucket_of("a"),))
    assert fresh.id == a.id and fresh.message.attempts == 1


def test_a_hand_back_leaves_the_rows_pending_without_spending_an_attempt() -> None:
    publish("a", "b")
    store = OutboxStore()
    claimed = store.claim(10)
    store.hand_back(claimed[0].batch)
    assert statuses() == [("a", Status.PENDING, 0), ("b", Status.PENDING, 0)]
    assert store.journal.entries() == []
    assert len(store.claim(10)) == 2


def test_a_batch_of_refusals_settles_each_row_with_its_own_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """fail and bury are set-based, one statement per ROWS_PER_STATEMENT rows (7 here,
    so 40 refusals take several): each row keeps its own error, delay and attempt count,
    and a row whose attempts moved since its claim (another relay took it over) is left
    alone."""
    monkeypatch.setattr(settlement_sql, "ROWS_PER_STATEMENT", 7)
    publish(*[f"r{i}" for i in range(40)])
    store = OutboxStore()
    claimed: list[ClaimedEvent] = []
    while taken := store.take(store.request(40), [e.message.aggregate_id for e in claimed]):
        claimed += taken  # a claim may take fewer heads
    assert len(claimed) == 40
    failures = [
        Failure(event, f"error {i}", delay=0 if i % 2 else 3600, dead=i % 3 == 0,
                counts_attempt=i % 4 != 0)
        for i, event in enumerate(claimed[:-1])
    ]
    OutboxEvent.objects.filter(id=claimed[-1].id).update(attempts=5)
    for batch in {e.batch for e in claimed}:
        store.settle(Settlement(batch, failures=[
            f for f in [*failures, Failure(claimed[-1], "not mine", dead=True)]
            if f.event.batch == batch]))
    rows = {row.id: row for row in OutboxEvent.objects.all()}
    now = timezone.now()
    for i, failure in enumerate(failures):
        row = rows[failure.event.id]
        assert row.last_error == f"error {i}"
        if failure.dead:
            assert (row.status, row.attempts) == (Status.DEAD, 1 if i % 4 else 0)
            assert row.next_retry_at is None and row.processed_at is not None
        else:
            assert (row.status, row.attempts) == (Status.FAILED, 1)
            assert row.next_retry_at is not None
            waits = (row.next_retry_at - now).total_seconds()
            assert (waits > 3000) if failure.delay else (waits < 60), (i, waits)
    last = rows[claimed[-1].id]
    assert (last.status, last.attempts, last.last_error) == (Status.PENDING, 5, None)


def test_long_errors_are_truncated_to_the_column() -> None:
    publish("a")
    store = OutboxStore()
    [event] = store.claim(1)
    store.settle(Settlement(event.batch, failures=[Failure(event, "x" * 5000, delay=1)]))
    assert len(OutboxEvent.objects.get().last_error or "") == 4000


def _age(status: Status, processed_days_ago: float | None, count: int) -> None:
    ids = publish(*[f"p{i}" for i in range(count)])
    when = timezone.now() - dt.timedelta(days=processed_days_ago) if processed_days_ago else None
    OutboxEvent.objects.filter(message_id__in=ids).update(
        status=status, processed_at=when,
        next_retry_at=timezone.now() if status == Status.FAILED else None,
    )


def test_purge_deletes_only_old_done_rows_in_batches() -> None:
    _age(Status.DONE, 10, 25)
    _age(Status.DONE, 1, 3)
    _age(Status.DEAD, 10, 4)
    _age(Status.PENDING, None, 2)
    _age(Status.FAILED, None, 2)
    seen: list[int] = []
    cutoff = timezone.now() - dt.timedelta(days=7)
    deleted = OutboxStore().purge(cutoff, batch_size=10, progress=seen.append)
    assert deleted == 25
    assert seen == [10, 20, 25]
    remaining = sorted(OutboxEvent.objects.values_list("status", flat=True))
    assert remaining == sorted([Status.DONE] * 3 + [Status.DEAD] * 4 + [0, 0, 3, 3])


def test_purge_dead_only_when_asked_and_soft_cap() -> None:
    _age(Status.DONE, 10, 30)
    _age(Status.DEAD, 10, 5)
    cutoff = timezone.now() - dt.timedelta(days=7)
    store = OutboxStore()
    # The soft cap stops after the batch that passes it.
    assert store.purge(cutoff, batch_size=8, max_rows=10) == 16
    assert store.purge(cutoff, statuses=(Status.DONE, Status.DEAD), batch_size=100) == 19
    assert not OutboxEvent.objects.exists()


def test_purge_refuses_open_statuses() -> None:
    with pytest.raises(EventferryError, match="purge deletes done and/or dead rows only"):
        OutboxStore().purge(timezone.now(), statuses=(Status.PENDING,))


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_relay_statements_run_prepared_with_a_generic_plan_and_leave_the_app_alone() -> None:
    publish(*[f"a{n % 3}" for n in range(12)])
    store = OutboxStore()
    claimed = store.claim(3)
    for _ in range(3):
        _, claimed = store.settle(Settlement(claimed[0].batch, delivered=claimed),
                                  claim=store.request(3))
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans "
                       "FROM pg_prepared_statements")
        prepared = cursor.fetchall()
        # The setup of the relay's transactions stays inside them.
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "auto"
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"
    claims = [row for row in prepared if row[0].startswith("WITH fresh AS")]
    acks = [row for row in prepared if "SET \"status\" = 2" in row[0]]
    assert len(claims) == len(acks) == 1
    assert claims[0][1:] == (4, 0) and acks[0][1:] == (3, 0)  # generic plans only
    # Nothing else was prepared: Django's own statements bind client-side as before.
    assert len(prepared) == 2


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_a_hot_aggregates_head_probe_stays_a_seek_in_the_generic_plan() -> None:
    # Written as NOT EXISTS, PostgreSQL's generic plan for a table holding one analysed
    # aggregate was a hash anti-join comparing every candidate with every open row (32 s
    # per claim at 20,000 rows): the 1-aggregate drain never finished.
    publish(*["hot"] * 3000)
    sql, slots = OutboxStore().dialect.claim.fresh_heads_sql(False)  # type: ignore[attr-defined]
    params = bind(slots, window=1000, heads=500, in_flight="[]")
    numbers = itertools.count(1)
    sql = re.sub("%s", lambda _: f"${next(numbers)}", sql)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name('outbox')}")
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE hot_heads AS {sql}")
        cursor.execute(f"EXPLAIN (COSTS OFF) EXECUTE hot_heads({', '.join(['%s'] * len(params))})",
                       params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("DEALLOCATE hot_heads")
    # A per-candidate subplan that stops at its first row, whichever index it seeks.
    assert "Anti Join" not in plan and "SubPlan" in plan, plan


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_a_hot_aggregates_done_rows_do_not_slow_the_probe_of_each_row_behind_its_head() -> None:
    # Until vacuum, each done row leaves index entries in the open-rows index. A probe
    # that seeks the aggregate's first open row steps over all of them, for every row a
    # claim scans behind the head: halfway through draining 20,000 rows of one aggregate
    # a full claim read 80 buffers per row and took a second.
    publish(*["hot"] * 4000)
    store = OutboxStore(max_chain=500)
    for _ in range(6):
        claimed = store.claim(500)
        store.settle(Settlement(claimed[0].batch, delivered=claimed))
    sql, slots = store.dialect.claim.fresh_heads_sql(False)  # type: ignore[attr-defined]
    with transaction.atomic(), connection.cursor() as cursor:
        # With the statistics a relay keeps (store/statistics.py), not whatever an earlier
        # test left behind: the plan, not the planner's guess, is what is measured here.
        cursor.execute(store.dialect.statistics.refresh_statistics_sql())
        # Asking for more heads than there are: the whole window is read.
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}",
                       bind(slots, heads=500, window=1000, in_flight="[]"))
        plan = cursor.fetchone()[0]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    buffers = plan[0]["Plan"]["Shared Hit Blocks"] + plan[0]["Plan"]["Shared Read Blocks"]
    assert buffers < 10 * 1000, buffers  # 1,000 open rows; a backward seek reads a few each


def test_purge_statements_delete_at_most_the_vendors_batch() -> None:
    """SQL Server's purge stays below its lock escalation threshold whatever is asked."""
    deletes: list[list[object]] = []

    def watch(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        if sql.lstrip().upper().startswith("DELETE"):
            deletes.append(list(params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch):
        OutboxStore().purge(timezone.now(), batch_size=10_000)
    expected = 4_000 if connection.vendor == "microsoft" else 10_000
    assert deletes and all(expected in params for params in deletes), deletes
