"""The payload's schema version on a real database: stored by
publish_event, defaulted per topic, checked against the topic's JSON Schema, claimed
with the row and sent with the message; and the settings that configure it."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from eventferry_django import NewEvent, publish_event, publish_events
from eventferry_django.checks import check_settings
from eventferry_django.exceptions import InvalidEvent
from eventferry_django.models import OutboxEvent
from eventferry_django.store.outbox import OutboxStore

ORDER_SCHEMA = {
    "type": "object",
    "required": ["reference", "lines"],
    "properties": {
        "reference": {"type": "string"},
        "lines": {"type": "array", "items": {
            "type": "object", "required": ["sku"],
            "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer"}},
        }},
    },
}
TOPICS = {"order.created": {"SCHEMA_VERSION": "2", "JSON_SCHEMA": ORDER_SCHEMA},
          "order.cancelled": {"SCHEMA_VERSION": "1"}}
GOOD = {"reference": "A-1", "lines": [{"sku": "X", "quantity": 2}]}


def publish(topic: str = "order.created", payload: Any = GOOD, **kwargs: Any) -> str:
    with transaction.atomic():
        return publish_event(topic, payload, aggregate_type="order", aggregate_id="A-1",
                             **kwargs)


def stored_versions() -> list[tuple[str, str | None]]:
    return list(OutboxEvent.objects.order_by("id").values_list("topic", "schema_version"))


@pytest.mark.django_db(transaction=True)
def test_a_version_given_or_the_topics_default_is_stored_and_claimed() -> None:
    with override_settings(EVENTFERRY={"TOPICS": TOPICS}):
        publish("order.cancelled")                       # the topic's default
        publish("order.cancelled", schema_version="1b")  # given: wins
        publish("invoice.sent", {"n": 1})                # no version anywhere
    assert stored_versions() == [("order.cancelled", "1"), ("order.cancelled", "1b"),
                                 ("invoice.sent", None)]

    claimed = [event.message for event in OutboxStore(max_chain=10).claim(10)]
    assert [m.schema_version for m in claimed] == ["1", "1b", None]
    # The claim also brings the row's creation time (CloudEvents' time), in UTC.
    now = dt.datetime.now(dt.UTC)
    for m in claimed:
        assert m.created_at is not None and m.created_at.utcoffset() == dt.timedelta(0)
        assert abs(m.created_at - now) < dt.timedelta(minutes=1)


@pytest.mark.django_db(transaction=True)
def test_one_insert_writes_versioned_and_unversioned_events_together() -> None:
    with transaction.atomic():
        publish_events([
            NewEvent("a", {"n": 1}, "order", "A-1"),
            NewEvent("b", {"n": 2}, "order", "A-2", schema_version="7"),
            {"topic": "c", "payload": {"n": 3}, "aggregate_type": "order",
             "aggregate_id": "A-3"},
        ])
    assert stored_versions() == [("a", None), ("b", "7"), ("c", None)]


@pytest.mark.django_db(transaction=True)
def test_a_payload_its_topics_schema_rejects_is_refused_naming_the_path() -> None:
    bad = {"reference": "A-1", "lines": [{"sku": "X"}, {"sku": 5}]}
    with override_settings(EVENTFERRY={"TOPICS": TOPICS}):
        with pytest.raises(InvalidEvent, match=r"payload at \$\.lines\[1\]\.sku: 5 is not "
                           r"of type 'string' \(the JSON Schema of topic 'order\.created'"):
            publish(payload=bad)
        with pytest.raises(InvalidEvent, match=r"events\[1\]\.payload at \$: 'lines' is a "
                           "required property"), transaction.atomic():
            publish_events([NewEvent("order.created", GOOD, "order", "A-1"),
                            NewEvent("order.created", {"reference": "A-2"}, "order", "A-2")])
        # The schema describes version 2: an event of another version is not held to it.
        publish(payload=bad, schema_version="1")
        publish()
    assert stored_versions() == [("order.created", "1"), ("order.created", "2")]


def problems(setting: dict[str, Any]) -> list[tuple[str, str]]:
    with override_settings(EVENTFERRY=setting):
        return [(m.id or "", m.msg) for m in check_settings()]


@pytest.mark.parametrize(("setting", "check_id", "text"), [
    ({"MESSAGE_FORMAT": "avro"}, "eventferry.E017", "MESSAGE_FORMAT'] is 'avro'"),
    ({"MESSAGE_FORMAT": "cloudevents-binary"}, "eventferry.E018",
     "CLOUDEVENTS_SOURCE'] is not set, and MESSAGE_FORMAT 'cloudevents-binary' needs it"),
    ({"CLOUDEVENTS_SOURCE": "has spaces"}, "eventferry.E018", "URI reference without spaces"),
    ({"TOPICS": {"t": {"VERSION": "2"}}}, "eventferry.E019", "keys among SCHEMA_VERSION"),
    ({"TOPICS": {"t": {"SCHEMA_VERSION": ""}}}, "eventferry.E019",
     "['t']['SCHEMA_VERSION'] is ''"),
    ({"TOPICS": {"t": {"JSON_SCHEMA": {"type": "strnig"}}}}, "eventferry.E019",
     "['t']['JSON_SCHEMA'] is not a valid JSON Schema"),
])
def test_message_settings_are_checked(setting: dict[str, Any], check_id: str, text: str
                                      ) -> None:
    found = problems(setting)
    assert any(found_id == check_id and text in message for found_id, message in found), found


def test_valid_message_settings_pass() -> None:
    assert problems({"MESSAGE_FORMAT": "cloudevents-structured",
                     "CLOUDEVENTS_SOURCE": "/shop/orders", "TOPICS": TOPICS}) == []
