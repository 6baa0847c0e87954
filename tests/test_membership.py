"""The relay registry and each relay's part of the aggregates, on a real database."""

from __future__ import annotations

import time

import pytest
from django.db import connection, transaction

from eventferry_django import NewEvent, publish_events
from eventferry_django.relay.membership import Membership, partition_of
from eventferry_django.relay.planner import ClaimPlanner
from eventferry_django.store.outbox import ClaimRequest, OutboxStore
from eventferry_django.store.registry import RelayRegistry
from eventferry_django.store.sql import Partition

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _empty_registry() -> None:
    """The registry is no model, so no flush empties it: relays that other tests killed
    may still be in it."""
    table = OutboxStore().dialect.name.relay_registry.quoted(connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table}")


def member(name: str, claim_timeout: float = 60.0) -> Membership:
    return Membership(RelayRegistry(), name, claim_timeout)


def test_relays_that_check_in_split_the_aggregates_into_distinct_parts() -> None:
    relays = [member(f"r{n}") for n in range(3)]
    for relay in relays + relays:  # the first round learns of those before it only
        relay.check_in()
    assert sorted(r.partition for r in relays) == [Partition(3, 0), Partition(3, 1),
                                                   Partition(3, 2)]
    relays[1].stop()
    for relay in (relays[0], relays[2]):
        relay.check_in()
    assert sorted(r.partition for r in (relays[0], relays[2])) == [Partition(2, 0),
                                                                  Partition(2, 1)]
    relays[2].stop()
    relays[0].check_in()
    assert (relays[0].relays, relays[0].partition) == (1, None)  # alone: claims as ever
    relays[0].stop()


def test_a_relay_that_stops_checking_in_is_dropped_after_half_the_claim_timeout() -> None:
    # The same relay id twice still counts as two relays: the instance names them.
    silent, alive = member("same", claim_timeout=6.0), member("same", claim_timeout=6.0)
    silent.check_in()
    alive.check_in()
    assert alive.relays == 2
    time.sleep(3.5)  # past half of CLAIM_TIMEOUT
    alive.check_in()
    assert (alive.relays, alive.partition) == (1, None)
    alive.stop()
    silent.stop()


def test_partition_of_an_instance_missing_from_the_registry_is_none() -> None:
    assert partition_of(["a", "b"], "c") is None
    assert partition_of(["a", "b"], "b") == Partition(2, 1)


def test_a_new_part_makes_the_planner_ask_for_the_full_batch_again() -> None:
    planner = ClaimPlanner(batch_size=100, max_chain=100, lease_timeout=60)
    request = planner.next_claim()
    assert request is not None
    planner.found(request, 40)
    planner.found(request, 40)
    assert planner.limit == 40
    request = planner.next_claim(partition=Partition(2, 0))
    assert request is not None and request.heads == 100 and request.partition == (2, 0)


@pytest.mark.skipif("connection.vendor == 'sqlite'",
                    reason="SQLite does not share the aggregates out (one writer, no hash)")
@pytest.mark.parametrize("max_chain", [1, 3])
def test_the_parts_of_a_claim_are_disjoint_and_cover_every_aggregate(max_chain: int) -> None:
    with transaction.atomic():
        publish_events([NewEvent("t", {"seq": seq}, "a", f"agg-{a}")
                        for seq in range(3) for a in range(40)])
    store = OutboxStore(max_chain=max_chain)
    parts = [store.take(ClaimRequest(500, 60, max_chain=max_chain, partition=Partition(3, k)))
             for k in range(3)]
    aggregates = [{event.message.aggregate_id for event in part} for part in parts]
    assert all(aggregates), aggregates  # 40 aggregates over 3 parts: none is empty
    assert sum(len(found) for found in aggregates) == len(set().union(*aggregates)) == 40
    # Each part took its aggregates' heads (and, chained, the rows behind them).
    assert sum(len(part) for part in parts) == 40 * min(max_chain, 3)
