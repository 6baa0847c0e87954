"""Two real databases (another PostgreSQL database beside PostgreSQL, PostgreSQL beside
SQLite): an outbox on each alias, events written where the business write goes, relays
and commands that stay on the alias they are given, and the router check."""

from __future__ import annotations

import io
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connections, transaction
from django.test import override_settings

from eventferry_django import publish_event
from eventferry_django.checks import check_settings
from eventferry_django.exceptions import NotInTransaction
from eventferry_django.inbox import handle_once
from eventferry_django.models import InboxMessage, OutboxEvent
from eventferry_django.publishers.memory import InMemoryPublisher

from .testapp.models import Order, Shipment

SECOND: str = getattr(settings, "SECOND", "second")

needs_second = pytest.mark.skipif(
    SECOND not in settings.DATABASES,
    reason="this run has no second database (tests/settings.py: sqlite and postgres runs)",
)


def events_on(alias: str) -> list[tuple[str, int]]:
    return list(OutboxEvent.objects.using(alias).order_by("id").values_list("topic", "status"))


def place_order(alias: str, reference: str) -> str:
    with transaction.atomic(using=alias):
        order = Order.objects.using(alias).create(reference=reference, total=Decimal("9.50"))
        return publish_event("order.placed", {"reference": order.reference},
                             aggregate_type="order", aggregate_id=order.pk, using=alias)


@needs_second
@pytest.mark.django_db(transaction=True, databases=["default", SECOND])
class TestTwoDatabases:
    def test_each_alias_has_an_outbox_and_events_follow_the_business_write(self) -> None:
        assert {connections["default"].vendor, connections[SECOND].vendor} <= {
            "sqlite", "postgresql"}
        message_id = place_order(SECOND, "SO-2")
        assert events_on(SECOND) == [("order.placed", 0)]
        assert OutboxEvent.objects.using(SECOND).get().message_id == message_id
        assert events_on("default") == []

        # Rolled back on the second database: neither the order nor its event stays.
        with pytest.raises(RuntimeError), transaction.atomic(using=SECOND):
            Order.objects.using(SECOND).create(reference="SO-3", total=Decimal("1.00"))
            publish_event("order.placed", {}, aggregate_type="order", aggregate_id="3",
                          using=SECOND)
            raise RuntimeError("rolled back")
        assert list(Order.objects.using(SECOND).values_list("reference", flat=True)) == [
            "SO-2"]
        assert len(events_on(SECOND)) == 1

    def test_a_transaction_on_the_other_alias_does_not_count(self) -> None:
        with pytest.raises(NotInTransaction) as refused, transaction.atomic(using="default"):
            Order.objects.create(reference="SO-1", total=Decimal("1.00"))
            publish_event("order.placed", {}, aggregate_type="order", aggregate_id="1",
                          using=SECOND)
        message = str(refused.value)
        # The autocommit error, plus where the caller's transaction actually is.
        assert message.startswith(
            f"publish_event() must run inside transaction.atomic(using='{SECOND}') so the "
            "event commits or rolls back with your changes; nothing was written.")
        assert "A transaction is open on 'default', not on 'second'" in message
        assert events_on(SECOND) == [] and events_on("default") == []

    def test_the_relay_relays_the_alias_it_is_given_and_no_other(self) -> None:
        InMemoryPublisher.reset()
        place_order("default", "SO-1")
        place_order(SECOND, "SO-2")
        place_order(SECOND, "SO-3")

        out = io.StringIO()
        call_command("outbox_relay", "--database", SECOND, "--until-empty", stdout=out)
        assert "2 published" in out.getvalue()
        assert [m.payload for m in InMemoryPublisher.sent] == [
            '{"reference": "SO-2"}', '{"reference": "SO-3"}']
        assert events_on(SECOND) == [("order.placed", 2)] * 2
        assert events_on("default") == [("order.placed", 0)]

        call_command("outbox_relay", "--until-empty", stdout=io.StringIO())
        assert events_on("default") == [("order.placed", 2)]
        assert len(InMemoryPublisher.sent) == 3

    def test_commands_take_the_alias(self) -> None:
        place_order(SECOND, "SO-2")
        status = io.StringIO()
        call_command("outbox_status", "--database", SECOND, "--json", stdout=status)
        assert '"pending": 1' in status.getvalue()
        assert f'"database": "{SECOND}"' in status.getvalue()
        call_command("outbox_relay", "--database", SECOND, "--until-empty",
                     stdout=io.StringIO())
        purged = io.StringIO()
        call_command("outbox_purge", "--database", SECOND, "--older-than", "0s", stdout=purged)
        assert "Deleted 1 done row(s)" in purged.getvalue()
        assert events_on(SECOND) == []

    def test_a_consumer_on_the_second_database_keeps_its_inbox_there(self) -> None:
        @handle_once("shipping", using=SECOND)
        def ship(message_id: str) -> None:
            Shipment.objects.using(SECOND).create(order_reference="SO-2")

        ship("m-1")
        ship("m-1")
        assert Shipment.objects.using(SECOND).count() == 1
        assert list(InboxMessage.objects.using(SECOND).values_list("message_id", flat=True)) \
            == ["m-1"]
        assert not InboxMessage.objects.using("default").exists()


# -- the router check -----------------------------------------------------------------------

class EverythingTo:
    """A router that sends every model's writes to one alias."""

    def __init__(self, alias: str, migrate_eventferry: bool = True) -> None:
        self.alias = alias
        self.migrate_eventferry = migrate_eventferry

    def db_for_write(self, model: Any, **hints: Any) -> str:
        return self.alias

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return None if app_label != "eventferry_django" else self.migrate_eventferry


class OtherAppsOnly:
    """A router with opinions about other apps only."""

    def db_for_write(self, model: Any, **hints: Any) -> str | None:
        return None if model._meta.app_label == "eventferry_django" else "elsewhere"


def router_errors(*routers: Any, database: str = "default") -> list[tuple[str, str, str]]:
    with override_settings(DATABASE_ROUTERS=list(routers),
                           EVENTFERRY={"DATABASE": database}):
        return [(m.id or "", m.msg, m.hint or "") for m in check_settings()
                if m.id in {"eventferry.E051", "eventferry.E052"}]


def test_a_router_that_sends_outbox_writes_elsewhere_is_reported() -> None:
    errors = router_errors(EverythingTo("replica"))
    assert [(i, m) for i, m, _ in errors] == [
        ("eventferry.E051", "A database router sends writes of eventferry_django.OutboxEvent "
         "to 'replica', but EVENTFERRY['DATABASE'] is 'default'."),
        ("eventferry.E051", "A database router sends writes of eventferry_django.InboxMessage "
         "to 'replica', but EVENTFERRY['DATABASE'] is 'default'."),
    ]
    assert "Set DATABASE to 'replica'" in errors[0][2]


def test_a_router_that_keeps_the_tables_off_the_outbox_database_is_reported() -> None:
    errors = router_errors(EverythingTo("default", migrate_eventferry=False))
    assert [i for i, _, _ in errors] == ["eventferry.E052", "eventferry.E052"]
    assert "does not allow migrating eventferry_django.OutboxEvent on 'default'" in errors[0][1]
    assert "allow_migrate() return True for app_label 'eventferry_django'" in errors[0][2]


def test_routers_that_agree_or_have_no_opinion_pass() -> None:
    assert router_errors() == []
    assert router_errors(OtherAppsOnly()) == []
    assert router_errors(EverythingTo("default")) == []
    # No router at all, and the outbox on another alias: eventferry always names its alias.
    if SECOND in settings.DATABASES:
        assert router_errors(database=SECOND) == []
        assert router_errors(EverythingTo(SECOND), database=SECOND) == []
