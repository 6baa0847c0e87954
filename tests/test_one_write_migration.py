"""Migration 0003 (release 0.2.0's DDL, for the one-write relay) on a real database: a
row a 0.1.0 relay left claimed is pending after it, a later claim by a 0.1.0 relay fails
naming ``CK_<outbox>_claimed_needs_0_2``, the bucket leases hold their 256 rows, and it
goes back to 0002 and forward again, as often as asked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from eventferry_django import NewEvent, publish_events
from eventferry_django.contract import BUCKETS, CLAIMED, DONE, PENDING
from eventferry_django.ddl import RELEASES, released
from eventferry_django.models import OutboxEvent
from eventferry_django.naming import TableName
from eventferry_django.store.bucket_leases import BucketLeases
from eventferry_django.store.tables import BUCKET_LEASE_COLUMNS, IN_FLIGHT_COLUMNS

from . import introspection

pytestmark = pytest.mark.django_db(transaction=True)

OUTBOX = TableName("outbox")
#: What a refused claim names. Compared without case: the T-SQL endpoint reports the
#: names it keeps lowercased (SQL Server reports them as created).
REFUSAL = OUTBOX.claimed_needs_0_2_check.lower()
BEFORE = "0002_task_results_json_text"


def migrate(target: str | None = None, *, fake: bool = False) -> None:
    """Migrate eventferry's tables to ``target`` (the last migration without one)."""
    call_command("migrate", "eventferry_django", *([target] if target else []), fake=fake,
                 verbosity=0)


@pytest.fixture
def before_0003() -> Iterator[None]:
    """The database as eventferry 0.1.0 left it (migrated up to 0002), and migrated to the
    end again afterwards, whatever the test did."""
    migrate(BEFORE)
    yield
    migrate()


def published(*aggregates: str) -> list[int]:
    with transaction.atomic():
        publish_events([NewEvent("t", {"n": n}, "agg", a) for n, a in enumerate(aggregates)])
    return list(OutboxEvent.objects.order_by("id").values_list("id", flat=True))


def claim_as_0_1_0(ids: list[int], **fields: object) -> None:
    """What a 0.1.0 relay's claim writes: status 1, and the lease in ``claimed_at``."""
    with transaction.atomic():
        OutboxEvent.objects.filter(id__in=ids).update(status=CLAIMED,
                                                      claimed_at=timezone.now(), **fields)


def bucket_rows() -> list[int]:
    return [bucket for bucket, *_ in BucketLeases().holders()]


def assert_refused(error: pytest.ExceptionInfo[DatabaseError]) -> None:
    message = str(error.value)
    assert REFUSAL in message.lower(), message
    if connection.vendor == "sqlite":  # the trigger words its refusal itself
        assert "upgrade it to 0.2.0" in message, message


def test_0003_hands_back_the_rows_a_0_1_0_relay_left_claimed(before_0003: None) -> None:
    claimed, retried, pending = published("a", "b", "c")
    claim_as_0_1_0([claimed])
    claim_as_0_1_0([retried], attempts=2, next_retry_at=timezone.now())
    migrate()
    rows = {row.id: row for row in OutboxEvent.objects.all()}
    # Pending again, no attempt counted, nothing scheduled: the next claim takes them.
    assert [(rows[i].status, rows[i].claimed_at, rows[i].next_retry_at, rows[i].attempts)
            for i in (claimed, retried, pending)] == [
        (PENDING, None, None, 0), (PENDING, None, None, 2), (PENDING, None, None, 0)]


def test_a_0_1_0_relays_claim_fails_naming_the_refusal() -> None:
    [row] = published("a")
    with pytest.raises(DatabaseError) as claim:
        claim_as_0_1_0([row])
    assert_refused(claim)
    with pytest.raises(DatabaseError) as insert, transaction.atomic():
        OutboxEvent.objects.create(topic="t", aggregate_type="agg", aggregate_id="b",
                                   message_id="m-claimed", payload="{}", status=CLAIMED,
                                   claimed_at=timezone.now())
    assert_refused(insert)
    # Every other status is written as before.
    OutboxEvent.objects.filter(id=row).update(status=DONE, processed_at=timezone.now())
    assert OutboxEvent.objects.get(id=row).status == DONE


def test_the_one_write_tables_are_created_beside_the_outbox() -> None:
    for name, columns in ((OUTBOX.bucket_leases, BUCKET_LEASE_COLUMNS),
                          (OUTBOX.in_flight, IN_FLIGHT_COLUMNS)):
        info = introspection.describe(connection, name)
        assert [(c, nullable) for c, _, nullable in info.columns] == [
            (c.name, c.nullable) for c in columns], name.table
    assert bucket_rows() == list(range(BUCKETS))


def test_0003_goes_back_to_0002_and_forward_again(before_0003: None) -> None:
    assert not introspection.exists(connection, OUTBOX.bucket_leases)
    assert not introspection.exists(connection, OUTBOX.in_flight)
    [row] = published("a")
    claim_as_0_1_0([row])  # refused no more: a 0.1.0 relay runs as before

    migrate()
    assert OutboxEvent.objects.get(id=row).status == PENDING
    assert bucket_rows() == list(range(BUCKETS))

    # Applied again over itself (unapplied without touching the database), and run again
    # as a DBA re-running what outbox_sql prints would: nothing changes.
    migrate(BEFORE, fake=True)
    migrate()
    with connection.cursor() as cursor:
        for kind in RELEASES["0.2.0"]:
            for statement in released("0.2.0", kind, connection.vendor):
                cursor.execute(statement)
    assert bucket_rows() == list(range(BUCKETS))
    with pytest.raises(DatabaseError) as claim:
        claim_as_0_1_0([row])
    assert_refused(claim)
