"""The store's contract operations on a real database: claim, ack, fail, dead, release,
purge, with head-of-aggregate ordering, lease take-back and fencing."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import time

import pytest
from django.db import connection, transaction
from django.utils import timezone

from eventferry_django import NewEvent, publish_events
from eventferry_django.exceptions import EventferryError
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.store import settlement_sql
from eventferry_django.store.outbox import ClaimedEvent, Failure, OutboxStore
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
    claimed = store.claim(10, lease_timeout=60)
    assert [(e.message.aggregate_id, json.loads(e.message.payload)) for e in claimed] == [
        ("a", {"n": 0}), ("b", {"n": 2}), ("c", {"n": 3}),
    ]
    # Nothing else is claimable until the heads are settled.
    assert store.claim(10, lease_timeout=60) == []
    assert store.ack(claimed) == 3
    second = store.claim(10, lease_timeout=60)
    assert [(e.message.aggregate_id, json.loads(e.message.payload)) for e in second] == [
        ("a", {"n": 1}), ("b", {"n": 4}),
    ]


def test_claimed_message_carries_the_row() -> None:
    with transaction.atomic():
        [message_id] = publish_events([NewEvent("order.paid", {"x": [1, 2]}, "order", "o-1",
                                                headers={"h": "v"}, partition_key="p")])
    [event] = OutboxStore().claim(5, lease_timeout=60)
    m = event.message
    assert (m.message_id, m.topic, m.aggregate_type, m.aggregate_id, m.partition_key) == (
        message_id, "order.paid", "order", "o-1", "p")
    assert m.headers == {"h": "v"} and m.attempts == 0
    assert json.loads(m.payload) == {"x": [1, 2]}
    row = OutboxEvent.objects.get()
    assert row.status == Status.CLAIMED and row.claimed_at is not None


def test_claim_limit_is_validated() -> None:
    with pytest.raises(EventferryError, match=r"claim limit must be 1\.\.10,000, got 0"):
        OutboxStore().claim(0, lease_timeout=60)
    with pytest.raises(EventferryError, match=r"got 10001"):
        OutboxStore().claim(10_001, lease_timeout=60)


def test_ack_marks_done_with_processed_at() -> None:
    publish("a", "b")
    store = OutboxStore()
    claimed = store.claim(10, lease_timeout=60)
    assert store.ack(claimed) == 2
    assert all(e.status == Status.DONE and e.processed_at for e in OutboxEvent.objects.all())
    assert store.claim(10, lease_timeout=60) == []


def test_failed_row_waits_for_its_retry_time_and_blocks_its_aggregate() -> None:
    publish("a", "a", "b")
    store = OutboxStore()
    first = store.claim(10, lease_timeout=60)
    a_head = next(e for e in first if e.message.aggregate_id == "a")
    b = next(e for e in first if e.message.aggregate_id == "b")
    assert store.record_failures([Failure(a_head, "broker said no", delay=3600)]) == 1
    store.ack([b])
    assert statuses() == [("a", Status.FAILED, 1), ("a", Status.PENDING, 0), ("b", Status.DONE, 0)]
    row = OutboxEvent.objects.get(id=a_head.id)
    assert row.last_error == "broker said no" and row.next_retry_at is not None
    assert store.claim(10, lease_timeout=60) == []  # not due; the second "a" waits behind it
    # The hour passes: moved back rather than slept, so a slow engine cannot make it due early.
    OutboxEvent.objects.filter(id=a_head.id).update(
        next_retry_at=timezone.now() - dt.timedelta(seconds=1))
    [retry] = store.claim(10, lease_timeout=60)
    assert retry.id == a_head.id and retry.message.attempts == 1


def test_dead_rows_never_block_or_return() -> None:
    publish("a", "a")
    store = OutboxStore()
    [head] = store.claim(10, lease_timeout=60)
    store.record_failures([Failure(head, "poison", dead=True)])
    row = OutboxEvent.objects.get(id=head.id)
    assert (row.status, row.attempts, row.last_error) == (Status.DEAD, 1, "poison")
    assert row.processed_at is not None
    [next_one] = store.claim(10, lease_timeout=60)
    assert next_one.id != head.id


def test_expired_lease_is_taken_back_with_an_attempt_and_the_stale_relay_is_fenced() -> None:
    publish("a")
    store = OutboxStore()
    [stale] = store.claim(1, lease_timeout=0.2)
    # Whether a lease has expired is the claimer's judgement of its age; a long timeout
    # asks "does it still hold?" without racing a slow engine to the 0.2 s mark.
    assert store.claim(1, lease_timeout=60) == []
    time.sleep(0.4)
    [fresh] = store.claim(1, lease_timeout=0.2)
    assert fresh.id == stale.id and fresh.message.attempts == 1
    assert fresh.lease != stale.lease
    # The relay that lost the lease can neither ack, fail, bury nor release the row.
    assert store.ack([stale]) == 0
    assert store.record_failures([Failure(stale, "late", delay=1)]) == 0
    assert store.record_failures([Failure(stale, "late", dead=True)]) == 0
    assert store.release([stale]) == 0
    assert OutboxEvent.objects.get().status == Status.CLAIMED
    assert store.ack([fresh]) == 1
    assert OutboxEvent.objects.get().status == Status.DONE


def test_a_claim_may_leave_expired_leases_for_later_but_never_due_retries() -> None:
    """What a busy relay's settlement claims ask for (see ClaimPlanner): where the
    vendor scans for overdue heads apart, the lease scan is skipped."""
    publish("a", "b")
    store = OutboxStore()
    [_held, b] = store.claim(2, lease_timeout=0.2)
    assert store.record_failures([Failure(b, "refused")]) == 1  # b: a retry, due now
    time.sleep(0.4)  # a's lease has expired
    publish("c")
    without_leases = dataclasses.replace(store.request(10, 0.2), expired_leases=False)
    taken = {event.message.aggregate_id for event in store.take(without_leases)}
    scans_apart = connection.vendor in ("postgresql", "mysql")
    assert taken == ({"b", "c"} if scans_apart else {"a", "b", "c"})
    if scans_apart:  # elsewhere a was taken above, and a slow engine may let it expire again
        later = {event.message.aggregate_id for event in store.take(store.request(10, 0.2))}
        assert "a" in later  # b and c may be back too, if the engine is slow


def test_release_hands_rows_back_without_spending_an_attempt() -> None:
    publish("a", "b")
    store = OutboxStore()
    claimed = store.claim(10, lease_timeout=60)
    assert store.release(claimed) == 2
    assert statuses() == [("a", Status.PENDING, 0), ("b", Status.PENDING, 0)]
    assert len(store.claim(10, lease_timeout=60)) == 2


def test_a_batch_of_refusals_settles_each_row_with_its_own_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """fail and bury are set-based, one statement per ROWS_PER_STATEMENT rows (7 here,
    so 40 refusals take several): each row keeps its own error, delay and attempt count,
    and a row another relay holds is left alone."""
    monkeypatch.setattr(settlement_sql, "ROWS_PER_STATEMENT", 7)
    publish(*[f"r{i}" for i in range(40)])
    store = OutboxStore()
    claimed: list[ClaimedEvent] = []
    while taken := store.claim(40, lease_timeout=60):  # a claim may take fewer heads
        claimed += taken
    assert len(claimed) == 40
    failures = [
        Failure(event, f"error {i}", delay=0 if i % 2 else 3600, dead=i % 3 == 0,
                counts_attempt=i % 4 != 0)
        for i, event in enumerate(claimed[:-1])
    ]
    stale = dataclasses.replace(claimed[-1], lease="2000-01-01 00:00:00")
    assert store.record_failures([*failures, Failure(stale, "not mine", dead=True)]) == 39
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
    assert rows[claimed[-1].id].status == Status.CLAIMED


def test_long_errors_are_truncated_to_the_column() -> None:
    publish("a")
    store = OutboxStore()
    [event] = store.claim(1, lease_timeout=60)
    store.record_failures([Failure(event, "x" * 5000, delay=1)])
    assert len(OutboxEvent.objects.get().last_error or "") == 4000


def _age(status: Status, processed_days_ago: float | None, count: int) -> None:
    ids = publish(*[f"p{i}" for i in range(count)])
    when = timezone.now() - dt.timedelta(days=processed_days_ago) if processed_days_ago else None
    OutboxEvent.objects.filter(message_id__in=ids).update(
        status=status, processed_at=when,
        claimed_at=timezone.now() if status == Status.CLAIMED else None,
        next_retry_at=timezone.now() if status == Status.FAILED else None,
    )


def test_purge_deletes_only_old_done_rows_in_batches() -> None:
    _age(Status.DONE, 10, 25)
    _age(Status.DONE, 1, 3)
    _age(Status.DEAD, 10, 4)
    _age(Status.PENDING, None, 2)
    _age(Status.CLAIMED, None, 2)
    _age(Status.FAILED, None, 2)
    seen: list[int] = []
    cutoff = timezone.now() - dt.timedelta(days=7)
    deleted = OutboxStore().purge(cutoff, batch_size=10, progress=seen.append)
    assert deleted == 25
    assert seen == [10, 20, 25]
    remaining = sorted(OutboxEvent.objects.values_list("status", flat=True))
    assert remaining == sorted([Status.DONE] * 3 + [Status.DEAD] * 4 + [0, 0, 1, 1, 3, 3])


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
    claimed = store.claim(3, 60)
    for _ in range(3):
        _, claimed = store.settle(claimed, [], claim=store.request(3, 60))
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
    sql, _ = OutboxStore().dialect.claim.oldest_heads_sql()  # type: ignore[attr-defined]
    sql = sql.replace("%s", "$1", 1).replace("%s", "$2", 1)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {connection.ops.quote_name('outbox')}")
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE hot_heads(bigint, bigint) AS {sql}")
        cursor.execute("EXPLAIN (COSTS OFF) EXECUTE hot_heads(1000, 500)")
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
        store.ack(store.claim(500, 60))
    sql, slots = store.dialect.claim.oldest_heads_sql()  # type: ignore[attr-defined]
    with transaction.atomic(), connection.cursor() as cursor:
        # With the statistics a relay keeps (store/statistics.py), not whatever an earlier
        # test left behind: the plan, not the planner's guess, is what is measured here.
        cursor.execute(store.dialect.statistics.refresh_statistics_sql())
        # Asking for more heads than there are: the walk reads its whole window.
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}",
                       bind(slots, heads=500, window=1000))
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
