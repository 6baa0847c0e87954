"""The batches in flight on a real database: the journal a relay writes with each claim,
the sweep with which a relay that took a bucket takes that bucket's rows out of other
relays' batches (counting an attempt each), and the fence that lets a settlement settle
only what was not taken (store/in_flight_journal.py)."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator

import pytest
from django.db import connection, connections, transaction

from eventferry_django import NewEvent, publish_events
from eventferry_django.models import OutboxEvent
from eventferry_django.store.in_flight_journal import (
    FORGET_EMPTIED_AFTER,
    InFlightJournal,
    decode,
    encode,
)

pytestmark = pytest.mark.django_db(transaction=True)


def forget_every_batch(store: InFlightJournal) -> None:
    """Empty the journal migration 0003 made: it has no model, so no flush empties it."""
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {store.sql.table}")


@pytest.fixture
def journal() -> Iterator[InFlightJournal]:
    """The journal, empty: emptied first as well, for a kept test database (SQL
    Server's) may hold batches of a run that was killed."""
    store = InFlightJournal()
    forget_every_batch(store)
    yield store
    forget_every_batch(store)


def published(*aggregates: str) -> list[tuple[int, int]]:
    """Rows written for ``aggregates``, as (id, bucket)."""
    with transaction.atomic():
        publish_events([NewEvent("t", {"n": n}, "agg", a) for n, a in enumerate(aggregates)])
    return list(OutboxEvent.objects.order_by("id").values_list("id", "bucket"))


def record(journal: InFlightJournal, relay: str, batch: int, ids: list[int]) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        journal.record(cursor, relay, batch, ids)


def settle(journal: InFlightJournal, relay: str, batch: int) -> list[int] | None:
    with transaction.atomic(), connection.cursor() as cursor:
        return journal.settled(cursor, relay, batch)


def sweep(journal: InFlightJournal, relay: str, buckets: set[int]) -> int:
    with transaction.atomic(), connection.cursor() as cursor:
        return journal.sweep(cursor, relay, buckets)


def attempts() -> dict[int, int]:
    return dict(OutboxEvent.objects.values_list("id", "attempts"))


def test_a_batch_is_kept_as_the_distances_between_its_ids() -> None:
    assert encode([1000128, 1000123, 1000124, 1000129]) == "1000123,1,4,1"
    assert decode("1000123,1,4,1") == [1000123, 1000124, 1000128, 1000129]
    assert encode([]) == "" and decode("") == []


def test_a_batch_nothing_was_taken_from_is_settled_whole(journal: InFlightJournal) -> None:
    record(journal, "r1", 1, [13, 11])
    record(journal, "r1", 2, [12])
    first, _ = journal.entries()
    assert (first.relay, first.batch, first.taken, first.ids) == ("r1", 1, 0, [11, 13])
    assert settle(journal, "r1", 1) is None
    assert [e.batch for e in journal.entries()] == [2]


def test_a_sweep_takes_the_rows_of_the_taken_buckets_from_the_other_relays(
        journal: InFlightJournal) -> None:
    (a, bucket_a), (b, bucket_b), (c, _) = published("x", "y", "x")
    assert bucket_a != bucket_b, "two aggregates in one bucket: pick others"
    record(journal, "r1", 1, [a, b])
    record(journal, "r2", 1, [c])  # the taker's own batch stays
    assert sweep(journal, "r2", {bucket_a}) == 1
    assert attempts() == {a: 1, b: 0, c: 0}
    assert {(e.relay, e.batch): (e.taken, e.ids) for e in journal.entries()} == {
        ("r1", 1): (1, [b]), ("r2", 1): (0, [c])}
    # r1 settles what is left of its batch, and only that.
    assert settle(journal, "r1", 1) == [b]
    assert [(e.relay, e.batch) for e in journal.entries()] == [("r2", 1)]


def test_a_swept_row_already_settled_costs_no_attempt(journal: InFlightJournal) -> None:
    [(a, bucket)] = published("x")
    OutboxEvent.objects.filter(id=a).update(status=2)
    record(journal, "r1", 1, [a])
    assert sweep(journal, "r2", {bucket}) == 1
    assert attempts() == {a: 0}


def test_a_batch_taken_whole_leaves_nothing_to_settle(journal: InFlightJournal) -> None:
    [(a, bucket)] = published("x")
    record(journal, "r1", 1, [a])
    assert sweep(journal, "r2", {bucket}) == 1
    # Its row stays, empty, for its own settlement: a row that is gone means settled.
    assert [(e.relay, e.taken, e.ids) for e in journal.entries()] == [("r1", 1, [])]
    assert settle(journal, "r1", 1) == []
    assert journal.entries() == []


def test_a_sweep_forgets_the_batches_taken_whole_long_ago(journal: InFlightJournal) -> None:
    """A relay that died mid-batch never settles it: once taken whole, its row would stay
    for good. Young, it stays for its relay (one merely paused); with rows left, it is
    still a batch in flight."""
    (a, bucket_a), (b, bucket_b), (c, _), (d, bucket_d) = published("x", "y", "x", "z")
    assert len({bucket_a, bucket_b, bucket_d}) == 3, "aggregates sharing a bucket: pick others"
    record(journal, "dead", 1, [a])       # taken whole, long ago
    record(journal, "dead", 2, [b, c])    # c's bucket taken, b's not: rows left
    record(journal, "paused", 1, [d])     # taken whole, just now
    assert sweep(journal, "r2", {bucket_a}) == 2
    assert sweep(journal, "r2", {bucket_d}) == 1
    ops, sql = journal.dialect.ops, journal.sql
    a_day_and_more = round((FORGET_EMPTIED_AFTER + dt.timedelta(minutes=5)).total_seconds() * 1000)
    then, params = ops.now_plus(ops.offset_param(-a_day_and_more))
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {sql.table} SET {sql.claimed_at} = {then} WHERE {sql.relay} = %s",
                       [*params, "dead"])
    assert sweep(journal, "r3", {99}) == 0  # a take whose buckets no batch holds
    assert sorted((e.relay, e.batch, e.ids) for e in journal.entries()) == [
        ("dead", 2, [b]), ("paused", 1, [])]


def test_a_batch_settled_again_after_an_outage_is_settled_whole(
        journal: InFlightJournal) -> None:
    record(journal, "r1", 1, [11])
    assert settle(journal, "r1", 1) is None
    assert settle(journal, "r1", 1) is None


def test_nothing_reads_a_row_count(journal: InFlightJournal) -> None:
    """A session with NOCOUNT on (SQL Server; the T-SQL endpoint after an ORM insert)
    reports -1 rows for every statement: the journal must not care."""
    if connection.vendor != "microsoft":
        pytest.skip("NOCOUNT is SQL Server's")
    (a, bucket_a), (b, _) = published("x", "y")
    with connection.cursor() as cursor:
        cursor.execute("SET NOCOUNT ON")
    try:
        record(journal, "r1", 1, [a, b])
        record(journal, "r1", 2, [a])
        assert settle(journal, "r1", 2) is None
        assert sweep(journal, "r2", {bucket_a}) == 1
        assert settle(journal, "r1", 1) == [b]
        assert journal.entries() == []
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET NOCOUNT OFF")


def test_a_settled_batch_leaves_nothing_to_sweep(journal: InFlightJournal) -> None:
    [(a, bucket)] = published("x")
    record(journal, "r1", 1, [a])
    assert settle(journal, "r1", 1) is None
    assert sweep(journal, "r2", {bucket}) == 0
    assert attempts() == {a: 0}


@pytest.mark.skipif("connection.vendor == 'sqlite'",
                    reason="SQLite's single writer runs the two transactions one after the "
                           "other; there is no row lock to wait on")
@pytest.mark.parametrize("first", ["settlement", "sweep"])
def test_a_settlement_and_a_sweep_of_one_batch_wait_for_each_other(
        journal: InFlightJournal, first: str) -> None:
    """Whichever reaches the batch's row first commits first; the other then sees what
    it did: the batch is settled or swept, never both."""
    (a, bucket_a), (b, bucket_b) = published("x", "y")
    assert bucket_a != bucket_b
    record(journal, "r1", 1, [a, b])
    holding, done = threading.Event(), threading.Event()
    results: dict[str, object] = {}

    def run(step: str) -> None:
        with connection.cursor() as cursor:
            if step == "sweep":
                results[step] = journal.sweep(cursor, "r2", {bucket_a})
            else:
                results[step] = journal.settled(cursor, "r1", 1)

    def second() -> None:
        try:
            holding.wait(10)
            with transaction.atomic():
                run("sweep" if first == "settlement" else "settlement")
        finally:
            done.set()
            connections.close_all()

    thread = threading.Thread(target=second)
    thread.start()
    with transaction.atomic():
        run(first)
        holding.set()
        # The other transaction reaches the row and waits for this one.
        assert not done.wait(1.0)
    thread.join(30)
    if first == "settlement":
        assert results == {"settlement": None, "sweep": 0}
        assert attempts() == {a: 0, b: 0}
    else:
        assert results == {"sweep": 1, "settlement": [b]}
        assert attempts() == {a: 1, b: 0}
    assert journal.entries() == []


def test_entries_name_their_relay(journal: InFlightJournal) -> None:
    record(journal, "r1", 1, [1])
    record(journal, "r2", 5, [2, 3])
    assert [(e.relay, e.batch, e.ids) for e in journal.entries("r2")] == [("r2", 5, [2, 3])]
