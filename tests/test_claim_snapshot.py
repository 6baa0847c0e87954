"""A claim must judge "head of its aggregate" on what is committed now, not on an older
snapshot of its transaction.

Found by the soak (benchmarks/soak.py) on MariaDB: InnoDB's locking read saw a writer's
freshly committed events while the claim's NOT EXISTS probe, a plain read, still saw the
transaction's snapshot from before them; with the earlier event claimed by another relay
meanwhile, the later one looked like a head and went out first.
"""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction

from eventferry_django import NewEvent, publish_events
from eventferry_django.models import OutboxEvent
from eventferry_django.store.outbox import OutboxStore

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_candidate_behind_an_open_row_is_dropped(vendor: str) -> None:
    """The claim's second look (MariaDB/MySQL): a candidate whose earlier row is open now,
    here claimed by another relay, is not handed out."""
    if vendor != "mysql":
        pytest.skip("the second look is MariaDB/MySQL's")
    with transaction.atomic():
        publish_events([NewEvent("t", {"n": n}, "agg", "x") for n in range(3)])
    first, second, third = OutboxEvent.objects.order_by("id").values_list("id", flat=True)
    store = OutboxStore()
    assert [json.loads(e.message.payload) for e in store.claim(10, lease_timeout=60)] == [
        {"n": 0}]
    with connection.cursor() as cursor:
        dialect = store.dialect
        assert dialect.claim.still_heads(cursor, [second, third]) == []  # type: ignore[attr-defined]
        # Its own earlier candidates do not hold a candidate back.
        store.ack(store.claim(10, lease_timeout=60) or [])
        OutboxEvent.objects.filter(id=first).update(status=2)
        assert dialect.claim.still_heads(cursor, [second, third]) == [second, third]  # type: ignore[attr-defined]
