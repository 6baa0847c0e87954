"""The bucket leases on a real database: taking, renewing and releasing buckets, and the
epochs that every take raises (store/bucket_leases.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import DatabaseError, connection, transaction

from eventferry_django import NewEvent, publish_events
from eventferry_django.contract import BUCKETS
from eventferry_django.ddl import released
from eventferry_django.models import OutboxEvent
from eventferry_django.relay.bucket_holder import LEASE_MARGIN, BucketHolder
from eventferry_django.store.bucket_leases import BucketLeases
from eventferry_django.store.in_flight_journal import InFlightJournal

pytestmark = pytest.mark.django_db(transaction=True)

LEASE = 60.0


def free_every_bucket(store: BucketLeases) -> None:
    """The tables migration 0003 made as it left them: every bucket free at epoch 0, no
    batch in flight. They have no model, so no flush resets them."""
    sql = store.sql
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {sql.table} SET {sql.owner} = NULL, {sql.epoch} = 0, "
                       f"{sql.expires_at} = NULL")
        cursor.execute(f"DELETE FROM {InFlightJournal().sql.table}")


@pytest.fixture
def leases() -> Iterator[BucketLeases]:
    """The bucket leases, every one free, and no batch in flight for a take to sweep:
    reset first as well, for a kept test database (SQL Server's) may hold the leases of
    a run that was killed."""
    store = BucketLeases()
    free_every_bucket(store)
    yield store
    free_every_bucket(store)


def run_ddl(statements: list[str]) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def expire(store: BucketLeases, *buckets: int) -> None:
    """Move the leases of ``buckets`` a minute into the past, as if their relay had
    stopped renewing them (rather than sleeping past a short lease on a slow engine)."""
    sql = store.sql
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {sql.table} SET {sql.expires_at} = {store.dialect.ops.now_plus_sql()} "
            f"WHERE {sql.bucket} IN ({', '.join(['%s'] * len(buckets))})",
            [store.dialect.ops.offset_param(-60_000), *buckets])


def test_the_seed_writes_one_free_row_per_bucket_once(leases: BucketLeases) -> None:
    with connection.cursor() as cursor:
        cursor.execute(*leases.sql.seed())  # again: nothing more
    holders = leases.holders()
    assert [bucket for bucket, *_ in holders] == list(range(BUCKETS))
    assert all(owner is None and epoch == 0 and not live for _, owner, epoch, live in holders)


def test_a_relay_takes_free_buckets_and_not_those_another_holds(leases: BucketLeases) -> None:
    assert leases.take("a", [1, 2, 3], LEASE) == {1: 1, 2: 1, 3: 1}
    assert leases.take("b", [3, 4], LEASE) == {4: 1}
    # Taking what it holds already changes nothing: no new epoch.
    assert leases.take("a", [1, 2, 3], LEASE) == {1: 1, 2: 1, 3: 1}
    holders = {bucket: (owner, live) for bucket, owner, _, live in leases.holders()}
    assert holders[3] == ("a", True) and holders[4] == ("b", True)
    assert holders[5] == (None, False)


def test_an_expired_lease_is_taken_under_a_new_epoch(leases: BucketLeases) -> None:
    leases.take("a", [7, 8], LEASE)
    expire(leases, 7)
    assert leases.take("b", [7, 8], LEASE) == {7: 2}
    assert leases.renew("a", LEASE) == {8: 1}


def test_renewal_keeps_the_epochs_and_leaves_expired_leases_to_be_taken(
    leases: BucketLeases,
) -> None:
    leases.take("a", [1, 2], LEASE)
    expire(leases, 2)
    assert leases.renew("a", LEASE) == {1: 1}
    # The expired one was not renewed: taking it again raises its epoch.
    assert leases.take("a", [2], LEASE) == {1: 1, 2: 2}


def test_release_lets_go_of_own_buckets_only_and_the_next_taker_raises_the_epoch(
    leases: BucketLeases,
) -> None:
    leases.take("a", [1, 2], LEASE)
    leases.take("b", [3], LEASE)
    leases.release("a", [1, 3])
    assert leases.renew("a", LEASE) == {2: 1}
    assert leases.renew("b", LEASE) == {3: 1}, "a let go of its own buckets only"
    assert leases.take("b", [1], LEASE) == {1: 2, 3: 1}
    leases.release("b")
    assert leases.renew("b", LEASE) == {}


# -- a relay's holder of its buckets (relay/bucket_holder.py) ----------------------------

class Clock:
    """The holder's monotonic clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_holders_take_what_their_shares_name_and_nothing_another_holds(
    leases: BucketLeases,
) -> None:
    a, b = BucketHolder(leases, InFlightJournal(), "a", LEASE), BucketHolder(leases, InFlightJournal(), "b", LEASE)
    a.want(range(0, 128))
    b.want(range(128, 256))
    assert set(a.tick()) == set(range(0, 128))
    assert set(b.tick()) == set(range(128, 256))
    a.want(range(0, 256))  # a sees itself alone for a moment: b's leases still run
    assert set(a.tick()) == set(range(0, 128))


def test_a_bucket_taken_from_a_relay_whose_lease_ran_out_is_swept_from_its_batches(
    leases: BucketLeases,
) -> None:
    with transaction.atomic():
        publish_events([NewEvent("t", {"n": n}, "agg", a) for n, a in enumerate("xyx")])
    (first, bucket), (second, other), (third, _) = OutboxEvent.objects.order_by(
        "id").values_list("id", "bucket")
    assert bucket != other, "two aggregates in one bucket: pick others"
    journal = InFlightJournal()
    a, b = BucketHolder(leases, journal, "a", LEASE), BucketHolder(leases, journal, "b", LEASE)
    a.want([bucket, other])
    epochs = a.tick()
    with transaction.atomic(), connection.cursor() as cursor:
        journal.record(cursor, "a", 1, [first, second, third])
    expire(leases, bucket)
    b.want([bucket])
    assert b.tick() == {bucket: epochs[bucket] + 1}
    [batch] = journal.entries()
    assert (batch.relay, batch.taken, batch.ids) == ("a", 2, [second])
    assert dict(OutboxEvent.objects.values_list("id", "attempts")) == {first: 1, second: 0,
                                                                        third: 1}
    b.tick()  # holding it already: nothing more is swept
    assert OutboxEvent.objects.get(id=first).attempts == 1


def test_a_bucket_moves_only_once_its_batches_in_flight_are_settled(
    leases: BucketLeases,
) -> None:
    a, b = BucketHolder(leases, InFlightJournal(), "a", LEASE), BucketHolder(leases, InFlightJournal(), "b", LEASE)
    a.want([1, 2])
    a.tick()
    a.sent([2])
    a.want([1])  # the share moved bucket 2 to b
    b.want([2])
    assert a.tick() == {1: 1, 2: 1}
    with a.claiming() as buckets:
        assert buckets == (1,), "no new batch from a bucket being let go"
    assert b.tick() == {}
    a.settled([2])
    assert a.tick() == {1: 1}
    assert b.tick() == {2: 2}


def test_a_claim_keeps_its_buckets_until_its_batch_is_sent(leases: BucketLeases) -> None:
    """The share may move a bucket while a claim reads it: the holder lets it go only
    once the claim ended and its batch, if any, is settled."""
    a = BucketHolder(leases, InFlightJournal(), "a", LEASE)
    a.want([1, 2])
    a.tick()
    with a.claiming() as buckets:
        assert buckets == (1, 2)
        a.want([1])
        assert a.tick() == {1: 1, 2: 1}, "bucket 2 is being read"
        a.sent([2])  # the claim found rows of bucket 2
    assert a.tick() == {1: 1, 2: 1}, "bucket 2 is in flight"
    a.settled([2])
    assert a.tick() == {1: 1}


def test_a_holder_of_every_bucket_claims_oldest_first(leases: BucketLeases) -> None:
    a = BucketHolder(leases, InFlightJournal(), "a", LEASE)
    a.want(range(BUCKETS))
    a.tick()
    with a.claiming() as buckets:
        assert buckets is None


def test_the_leases_count_as_valid_from_before_the_tick_less_a_margin(
    leases: BucketLeases,
) -> None:
    clock = Clock()
    holder = BucketHolder(leases, InFlightJournal(), "a", LEASE, clock=clock)
    assert not holder.valid(), "nothing held yet"
    holder.want([3])
    holder.tick()
    clock.now += LEASE * (1 - LEASE_MARGIN) - 0.01
    assert holder.valid()
    clock.now += 0.02
    assert not holder.valid()


def test_a_failed_tick_does_not_extend_the_leases(leases: BucketLeases) -> None:
    clock = Clock()
    holder = BucketHolder(leases, InFlightJournal(), "a", LEASE, clock=clock)
    holder.want([3])
    holder.tick()
    valid_until = clock.now + LEASE * (1 - LEASE_MARGIN)
    run_ddl(released("0.2.0", "buckets", connection.vendor, forwards=False))
    try:
        clock.now += LEASE / 2
        with pytest.raises(DatabaseError):
            holder.tick()
        clock.now = valid_until - 0.01
        assert holder.valid()
        clock.now = valid_until + 0.01
        assert not holder.valid()
    finally:  # the table as migration 0003 makes it, for every later test
        run_ddl(released("0.2.0", "buckets", connection.vendor))


def test_release_all_lets_every_bucket_go(leases: BucketLeases) -> None:
    holder = BucketHolder(leases, InFlightJournal(), "a", LEASE)
    holder.want([4, 5])
    holder.tick()
    holder.release_all()
    assert not holder.valid() and holder.held() == {}
    assert leases.take("b", [4, 5], LEASE) == {4: 2, 5: 2}
