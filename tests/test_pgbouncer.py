"""Through PgBouncer in transaction pooling mode, each transaction on whichever server
session is free: relays, ``publish_event()`` and the admin work, and nothing depends on a
database session surviving between transactions (:mod:`tests.pgbouncer`)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connection, transaction

from eventferry_django import NewEvent, publish_events
from eventferry_django.models import OutboxEvent, Status

from .pgbouncer import PgBouncer, running_pgbouncer
from .relay_process import start_relay, wait_until
from .test_admin import DEAD, client_for, make_event, post_action, staff_user
from .test_relay_crashes import published, settings_for

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PgBouncer pools PostgreSQL"),
]


@pytest.fixture
def bouncer() -> Iterator[PgBouncer]:
    with running_pgbouncer() as running:
        yield running


@contextmanager
def through(bouncer: PgBouncer) -> Iterator[None]:
    """This test's own queries through ``bouncer`` meanwhile."""
    settings = connection.settings_dict
    saved = settings["HOST"], settings["PORT"]
    connection.close()
    settings["HOST"], settings["PORT"] = "127.0.0.1", bouncer.port
    try:
        yield
    finally:
        connection.close()
        settings["HOST"], settings["PORT"] = saved


@pytest.mark.slow
def test_relays_sharing_buckets_on_one_server_session_deliver_everything_in_order(
        bouncer: PgBouncer, tmp_path: Path) -> None:
    out = tmp_path / "published.jsonl"
    with transaction.atomic():
        message_ids = publish_events([NewEvent("t", {"n": n}, "order", f"o{n % 20}")
                              for n in range(2000)])
    logs = [tmp_path / f"relay{n}.log" for n in range(3)]
    # Relays that share the buckets, their bucket leases and their batches in flight
    # kept in tables, never in a server session.
    relays = [start_relay(settings_for(out), "--poll-interval", "0.1", "--batch-size", "50",
                          log=log, db_port=bouncer.port) for log in logs]
    try:
        wait_until(lambda: not OutboxEvent.objects.open().exists(), timeout=120,
                   what="the relays to deliver everything")
    finally:
        for relay in relays:
            relay.send_signal(signal.SIGTERM)
    codes = [relay.wait(60) for relay in relays]
    texts = [log.read_text() for log in logs]
    assert codes == [0, 0, 0], texts
    assert all("3 relay(s) share the work" in text for text in texts), texts
    # Each relay's prepared claim meets the others' in the one server session ("already
    # exists"): those stopped preparing and went on.
    assert any("lost a prepared statement" in text for text in texts), texts

    assert list(OutboxEvent.objects.values_list("status", "attempts").distinct()) == [
        (Status.DONE, 0)]
    lines = published(out)
    assert sorted({line["message_id"] for line in lines}) == sorted(message_ids)
    first: dict[str, list[int]] = {}
    seen: set[int] = set()
    for line in sorted(lines, key=lambda line: line["at"]):
        if line["id"] not in seen:
            seen.add(line["id"])
            first.setdefault(line["aggregate_id"], []).append(line["id"])
    assert all(order == sorted(order) for order in first.values())


def test_publishing_and_the_admin_work_through_it(bouncer: PgBouncer) -> None:
    with through(bouncer):
        with transaction.atomic():
            message_ids = publish_events([NewEvent("t", {"n": n}, "order", "o1")
                                            for n in range(3)])
        dead = make_event()
        client = client_for(staff_user("operator", "view_deadoutboxevent",
                                       "redrive_deadoutboxevent"))
        listing = client.get(DEAD)
        assert listing.status_code == 200
        assert post_action(client, "redrive_selected", [dead.pk],
                           confirm=True).status_code == 302
    assert OutboxEvent.objects.filter(message_id__in=message_ids).count() == 3
    dead.refresh_from_db()
    assert dead.status == Status.PENDING
    assert f"login attempt: db={connection.settings_dict['NAME']}" in bouncer.log()
