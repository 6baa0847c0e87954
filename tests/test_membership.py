"""The relay registry and each relay's share of the buckets, on a real database; the
assignment itself, without one."""

from __future__ import annotations

import time
import uuid
from collections import Counter

import pytest
from django.db import connection, transaction

from eventferry_django import NewEvent, publish_events
from eventferry_django.contract import BUCKETS, bucket_of
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.relay.bucket_filler import BucketFiller
from eventferry_django.relay.membership import BUCKET_RELAY, Membership, assign, buckets_of
from eventferry_django.store.claim import ClaimRequest
from eventferry_django.store.outbox import OutboxStore
from eventferry_django.store.registry import RelayRegistry

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_relay_registry")]


@pytest.fixture(autouse=True)
def _empty_registry() -> None:
    """The registry is no model, so no flush empties it: relays that other tests killed
    may still be in it."""
    table = OutboxStore().dialect.name.relay_registry.quoted(connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table}")


def member(name: str, claim_timeout: float = 60.0) -> Membership:
    return Membership(RelayRegistry(), name, claim_timeout)


def instances(count: int) -> list[str]:
    return [f"{BUCKET_RELAY}{uuid.uuid4().hex}" for _ in range(count)]


# -- the assignment, without a database ----------------------------------------------------
@pytest.mark.django_db(transaction=False)
@pytest.mark.parametrize("relays", [2, 3, 4, 8, 12, 16])
def test_every_bucket_has_one_owner_and_shares_differ_by_one_bucket_at_most(
    relays: int,
) -> None:
    owned = assign(tuple(instances(relays)))
    buckets = [bucket for share in owned.values() for bucket in share]
    assert sorted(buckets) == list(range(BUCKETS))
    sizes = [len(share) for share in owned.values()]
    assert max(sizes) - min(sizes) <= 1, sizes


@pytest.mark.django_db(transaction=False)
@pytest.mark.parametrize("relays", [2, 4, 8])
def test_a_relay_that_joins_or_leaves_moves_little_more_than_its_share(relays: int) -> None:
    """A join moves the buckets the newcomer must take (1/(N+1) of them) and a few more
    (bounded loads rebalance the counts); a leave moves about the leaver's."""
    names = instances(relays + 1)
    before, after = assign(tuple(names[:relays])), assign(tuple(names))
    owner_before = {b: name for name, share in before.items() for b in share}
    owner_after = {b: name for name, share in after.items() for b in share}
    moved = sum(owner_before[b] != owner_after[b] for b in range(BUCKETS))
    assert len(after[names[-1]]) <= moved <= 1.6 * BUCKETS / (relays + 1)
    # Leaving is the same change seen the other way round.
    assert sum(owner_after[b] != owner_before[b] for b in range(BUCKETS)) == moved


@pytest.mark.django_db(transaction=False)
def test_a_relay_alone_or_beside_a_relay_of_an_earlier_release_claims_every_bucket() -> None:
    me, other = instances(2)
    assert buckets_of([me], me) is None
    assert buckets_of([me, other], "missing") is None  # its check-ins are failing
    assert buckets_of([me, uuid.uuid4().hex], me) is None  # an earlier release's relay
    # A 0.1.0 relay (its claims fail since migration 0003): no bucket may be left to it.
    assert buckets_of([me, f"b:{uuid.uuid4().hex}"], me) is None
    assert buckets_of([me, other], me) == assign((me, other))[me]


# -- on a database -------------------------------------------------------------------------
def test_relays_that_check_in_share_every_bucket_once() -> None:
    relays = [member(f"r{n}") for n in range(3)]
    for relay in relays + relays:  # the first round learns of those before it only
        relay.look()
    shares = [relay.buckets for relay in relays]
    assert all(share is not None for share in shares)
    assert sorted(b for share in shares for b in share or ()) == list(range(BUCKETS))
    relays[1].stop()
    for relay in (relays[0], relays[2]):
        relay.look()
    left = [relays[0].buckets or (), relays[2].buckets or ()]
    assert sorted(b for share in left for b in share) == list(range(BUCKETS))
    relays[2].stop()
    relays[0].look()
    assert (relays[0].relays, relays[0].buckets) == (1, None)  # alone: every bucket
    relays[0].stop()


def test_a_relay_that_stops_checking_in_is_dropped_after_half_the_claim_timeout() -> None:
    # The same relay id twice still counts as two relays: the instance names them.
    silent, alive = member("same", claim_timeout=6.0), member("same", claim_timeout=6.0)
    silent.look()
    alive.look()
    assert alive.relays == 2
    time.sleep(3.5)  # past half of CLAIM_TIMEOUT
    alive.look()
    assert (alive.relays, alive.buckets) == (1, None)
    alive.stop()
    silent.stop()


def test_beside_a_checked_in_relay_of_an_earlier_release_every_bucket_is_claimed() -> None:
    """A rolling upgrade: an earlier release's relay checks in under a plain name and
    shares by a hash of its own, so this release's relays claim every bucket meanwhile,
    and share again once it is gone."""
    relay, new = member("new"), member("newer")
    earlier = RelayRegistry()
    earlier.check_in(uuid.uuid4().hex, "old", 30.0)
    for _ in range(2):
        relay.look()
        new.look()
    assert (relay.relays, relay.buckets, new.buckets) == (3, None, None)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {earlier.sql.table} WHERE "
                       f"{earlier.sql.relay_id} = %s", ["old"])
    relay._checked_in_at = new._checked_in_at = 0.0  # check in again now
    relay.look()
    new.look()
    assert relay.buckets and new.buckets
    assert sorted((*relay.buckets, *new.buckets)) == list(range(BUCKETS))
    relay.stop()
    new.stop()


def test_a_look_between_check_ins_reads_without_stamping() -> None:
    relay = member("r")
    relay.look()  # checks in
    stamped = relay._checked_in_at
    relay.look()  # within the check-in interval: a read
    assert relay._checked_in_at == stamped and relay.relays == 1
    relay.stop()


@pytest.mark.skipif("connection.vendor == 'sqlite'",
                    reason="SQLite does not share the aggregates out (one writer)")
@pytest.mark.parametrize("max_chain", [1, 3])
def test_claims_of_disjoint_buckets_take_disjoint_aggregates_and_cover_them_all(
    max_chain: int,
) -> None:
    names = [f"agg-{a}" for a in range(40)]
    with transaction.atomic():
        publish_events([NewEvent("t", {"seq": seq}, "a", name)
                        for seq in range(3) for name in names])
    shares = assign(tuple(instances(3))).values()
    store = OutboxStore(max_chain=max_chain)
    parts = [store.take(ClaimRequest(500, max_chain=max_chain, buckets=share))
             for share in shares]
    aggregates = [{event.message.aggregate_id for event in part} for part in parts]
    for share, found in zip(shares, aggregates, strict=True):
        assert {bucket_of(name) for name in found} <= set(share)
    assert sum(len(found) for found in aggregates) == len(set().union(*aggregates)) == 40
    # Each part took its aggregates' heads (and, chained, the rows behind them).
    assert sum(len(part) for part in parts) == 40 * min(max_chain, 3)


@pytest.mark.skipif("connection.vendor == 'sqlite'",
                    reason="SQLite does not share the aggregates out (one writer)")
def unbucket(store: OutboxStore, condition: str = "1 = 1") -> None:
    """Rows as a development build before 0.1.0 wrote them: without a bucket."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {store.dialect.table} SET {store.dialect.ops.quote('bucket')} "
                       f"= NULL WHERE {condition}")


def buckets_by_message() -> dict[str, int | None]:
    return dict(OutboxEvent.objects.values_list("message_id", "bucket"))


@pytest.mark.skipif("connection.vendor == 'sqlite'",
                    reason="SQLite does not share the aggregates out (one writer)")
def test_a_fill_gives_fresh_rows_without_a_bucket_theirs_and_nothing_else() -> None:
    names = [f"agg-{a}" for a in range(30)]
    with transaction.atomic():
        publish_events([NewEvent("t", {"seq": seq}, "a", name, message_id=f"{name}/{seq}")
                        for seq in range(3) for name in names])
    store = OutboxStore()
    unbucket(store)
    # A settled row and a retry keep what they have: the fill is for fresh rows.
    done, retry = "agg-0/0", "agg-1/0"
    OutboxEvent.objects.filter(message_id=done).update(status=Status.DONE)
    OutboxEvent.objects.filter(message_id=retry).update(status=Status.FAILED)

    assert store.fill_buckets() == 30
    filled = buckets_by_message()
    assert filled.pop(done) is None and filled.pop(retry) is None
    assert filled == {message: bucket_of(message.split("/")[0]) for message in filled}
    assert store.fill_buckets() == 0


@pytest.mark.skipif("connection.vendor == 'sqlite'",
                    reason="SQLite does not share the aggregates out (one writer)")
def test_a_relay_with_a_share_fills_as_it_gets_it_then_at_check_ins() -> None:
    """Relays started together fill before their first claim; afterwards a relay
    fills at each check-in, and at every look while it finds rows without a bucket."""
    with transaction.atomic():
        publish_events([NewEvent("t", {}, "a", f"agg-{a}") for a in range(10)])
    store = OutboxStore()
    unbucket(store)
    first = Membership(RelayRegistry(), "first", 60.0, filler=BucketFiller(store, "first"))
    second = member("second")
    first.look()  # alone: no share, nothing filled
    assert set(buckets_by_message().values()) == {None}
    second.look()
    first.look()  # a share: filled at once, whatever the check-in interval
    assert None not in buckets_by_message().values()
    first.look()  # it found rows last time, so it looks again: none now

    with transaction.atomic():
        publish_events([NewEvent("t", {}, "a", "late")])
    unbucket(store, "aggregate_id = 'late'")
    first.look()  # neither a new share nor a check-in: the last fill found none
    assert buckets_by_message()[OutboxEvent.objects.get(aggregate_id="late").message_id] is None
    first._checked_in_at = 0.0  # a check-in is due
    first.look()
    assert None not in buckets_by_message().values()


@pytest.mark.django_db(transaction=False)
def test_bucket_of_spreads_typical_aggregate_ids() -> None:
    """The spread the shares rest on: a thousand ids like those of the benchmarks fill
    every bucket, none with more than a handful."""
    counts = Counter(bucket_of(f"agg-{n:05d}") for n in range(1000))
    assert len(counts) >= 240 and max(counts.values()) <= 12
