"""Cutoffs against the UTC columns are UTC whatever ``USE_TZ`` and ``TIME_ZONE`` say.

The database stamps ``processed_at``, ``created_at`` and ``handled_at`` with its UTC
clock. With ``USE_TZ = False`` (common where SQL Server is) Django's own "now" is local
wall time: a cutoff taken from it was hours off wherever ``TIME_ZONE`` is not UTC. Run
with one zone behind UTC and one ahead, so a cutoff off either way shows.
"""

from __future__ import annotations

import datetime as dt
import io
import time
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.db import transaction
from django.test import override_settings

from eventferry_django import NewEvent, publish_events
from eventferry_django.inbox import record_message
from eventferry_django.maintenance import RedriveSelection, purge, purge_inbox, redrive
from eventferry_django.models import InboxMessage, OutboxEvent, Status
from eventferry_django.store.outbox import Failure, OutboxStore, Settlement

pytestmark = pytest.mark.django_db(transaction=True)

BEHIND_UTC = "America/New_York"  # local wall time is hours earlier than UTC
AHEAD_OF_UTC = "Asia/Tokyo"  # and here hours later


@pytest.fixture(params=[BEHIND_UTC, AHEAD_OF_UTC])
def local_time(request: pytest.FixtureRequest) -> Iterator[str]:
    with override_settings(USE_TZ=False, TIME_ZONE=request.param):
        yield request.param


def settled_just_now(*, dead: bool = False) -> None:
    """One row, done (or dead) by the database's clock a moment ago."""
    with transaction.atomic():
        publish_events([NewEvent("t", {}, "agg", "1")])
    store = OutboxStore()
    [event] = store.claim(1)
    store.settle(Settlement(event.batch, failures=[Failure(event, "poison", dead=True)])
                 if dead else Settlement(event.batch, delivered=[event]))
    past_the_stamp()


def past_the_stamp() -> None:
    """The columns keep milliseconds, rounded half up: a row stamped half a millisecond
    ago reads as now, and a cutoff of "now" would miss it. These tests are about hours."""
    time.sleep(0.002)


def test_purge_older_than_zero_takes_what_was_just_done(local_time: str) -> None:
    settled_just_now()
    assert purge(dt.timedelta(0), dry_run=True).rows == 1
    assert purge(dt.timedelta(0)).rows == 1
    assert not OutboxEvent.objects.exists()


def test_purge_older_than_an_hour_keeps_what_was_just_done(local_time: str) -> None:
    settled_just_now()
    assert purge(dt.timedelta(hours=1), dry_run=True).rows == 0
    assert purge(dt.timedelta(hours=1)).rows == 0
    assert OutboxEvent.objects.count() == 1


def test_the_reported_cutoff_is_utc(local_time: str) -> None:
    cutoff = purge(dt.timedelta(hours=1), dry_run=True).cutoff
    expected = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    assert cutoff.utcoffset() == dt.timedelta(0)
    assert abs(cutoff - expected) < dt.timedelta(minutes=1)


def test_inbox_purge_cuts_at_utc(local_time: str) -> None:
    with transaction.atomic():
        record_message("shipping", "m-1")
    past_the_stamp()
    assert purge_inbox(dt.timedelta(hours=1)).rows == 0
    assert purge_inbox(dt.timedelta(0), dry_run=True).rows == 1
    assert purge_inbox(dt.timedelta(0)).rows == 1
    assert not InboxMessage.objects.exists()


def test_redrive_since_and_until_are_utc(local_time: str) -> None:
    settled_just_now(dead=True)
    now = dt.datetime.now(dt.UTC)
    hour = dt.timedelta(hours=1)
    assert redrive(RedriveSelection(until=now - hour), dry_run=True).rows == 0
    assert redrive(RedriveSelection(since=now + hour), dry_run=True).rows == 0
    assert redrive(RedriveSelection(since=now - hour, until=now + hour)).rows == 1
    assert OutboxEvent.objects.get().status == Status.PENDING


def test_redrive_since_a_duration_ago(local_time: str) -> None:
    settled_just_now(dead=True)
    out = io.StringIO()
    call_command("outbox_redrive", "--since", "1h", stdout=out)
    assert out.getvalue().strip() == "Redrove 1 event(s)."


def test_the_archive_clock_is_utc(local_time: str) -> None:
    """The history pipeline's cutoffs come from the database clock, read as UTC."""
    assert abs(OutboxStore().utc_now() - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=1)
