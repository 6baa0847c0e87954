"""The Celery tasks run the same relay, purge and archive as the commands."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import transaction
from django.utils import timezone

from eventferry_django import NewEvent, publish_events
from eventferry_django.inbox import record_message
from eventferry_django.models import InboxMessage, OutboxEvent, Status
from eventferry_django.publishers.memory import InMemoryPublisher
from eventferry_django.tasks import archive_closed, purge_closed, purge_inbox_records, relay

pytestmark = pytest.mark.django_db(transaction=True)


def test_relay_task_drains_and_reports() -> None:
    InMemoryPublisher.reset()
    with transaction.atomic():
        publish_events([NewEvent("t", {}, "a", str(n)) for n in range(12)])
    result = relay.apply(kwargs={"max_events": 10, "batch_size": 4}).get()
    assert result == {"published": 10, "retried": 0, "dead": 0, "released": 0, "errors": 0}
    assert relay.apply().get()["published"] == 2
    assert OutboxEvent.objects.done().count() == 12


def test_purge_task_deletes_old_closed_rows() -> None:
    with transaction.atomic():
        ids = publish_events([NewEvent("t", {}, "a", str(n)) for n in range(3)])
    OutboxEvent.objects.filter(message_id__in=ids[:2]).update(
        status=Status.DONE, processed_at=timezone.now() - dt.timedelta(days=8))
    assert purge_closed.apply(kwargs={"older_than": "7d"}).get() == 2
    assert OutboxEvent.objects.count() == 1


def test_purge_inbox_task_deletes_old_records() -> None:
    for n in range(3):
        with transaction.atomic():
            record_message("shipping" if n else "billing", f"m-{n}")
    InboxMessage.objects.filter(message_id__in=["m-0", "m-1"]).update(
        handled_at=timezone.now() - dt.timedelta(days=31))
    assert purge_inbox_records.apply(kwargs={"consumer": "shipping"}).get() == 1
    assert purge_inbox_records.apply().get() == 1  # default: older than 30 days
    assert list(InboxMessage.objects.values_list("message_id", flat=True)) == ["m-2"]


def test_archive_task_archives_and_purges(spark: object, tmp_path: object) -> None:
    from .history_data import seed

    history = seed(old_done=40, old_dead=5, recent=3, open_each=1)
    result = archive_closed.apply(kwargs={"to": str(tmp_path), "older_than": "1d",
                                          "status": "both", "purge": True}).get()
    assert result["archived"] == result["purged"] == history.old_done + history.old_dead
    assert result["run_id"] and result["summary"].startswith("Archived 45 row(s)")
    assert OutboxEvent.objects.count() == history.recent + history.open_rows
