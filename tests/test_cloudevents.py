"""CloudEvents 1.0 on the wire (``EVENTFERRY["MESSAGE_FORMAT"]``), read back by the
CloudEvents SDK: through RabbitMQ (the confirm pipeline), Redis (kombu's producer) and
Celery, in binary and structured mode; and the inbox deduplicating on the event's id.

Needs RabbitMQ (``EVENTFERRY_AMQP_URL``) and Redis (``EVENTFERRY_REDIS_URL``), like
tests/test_publishers.py.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from typing import Any

import kombu
import pytest
from cloudevents.core.base import BaseCloudEvent
from cloudevents.core.bindings.amqp import AMQPMessage, from_amqp
from cloudevents.core.formats.json import JSONFormat
from django.db import transaction
from django.test import override_settings

from eventferry_django import publish_event
from eventferry_django.inbox.kombu import Delivery, InboxCallback
from eventferry_django.models import InboxMessage, OutboxEvent
from eventferry_django.publishers.base import OutboundMessage, PublishResult
from eventferry_django.publishers.celery import CeleryPublisher
from eventferry_django.publishers.kombu import KombuPublisher
from eventferry_django.publishers.message_format import (
    CLOUDEVENTS_JSON,
    MessageFormat,
    cloudevent_id,
)
from eventferry_django.store.outbox import OutboxStore

from . import test_publishers
from .amqp import require_broker
from .test_publishers import AMQP_URL, REDIS_URL, BoundQueue, body_bytes, message

MODES = ["cloudevents-binary", "cloudevents-structured"]
SOURCE = "https://shop.example.com/orders"
CREATED = dt.datetime(2026, 11, 25, 9, 30, 15, 123000, tzinfo=dt.UTC)
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def cloudevents(mode: str) -> Any:
    return override_settings(EVENTFERRY={"MESSAGE_FORMAT": mode,
                                         "CLOUDEVENTS_SOURCE": SOURCE})


def versioned(n: int = 1, **fields: Any) -> OutboundMessage:
    """A claimed row with every attribute the mapping uses."""
    values: dict[str, Any] = dict(created_at=CREATED, schema_version="2",
                                  trace_id=TRACEPARENT, partition_key="P-7",
                                  headers={"tenant": "acme"})
    values.update(fields)
    return message(n, **values)


def read_with_sdk(received: Any) -> BaseCloudEvent:
    """What a consumer using the CloudEvents SDK's AMQP binding reads from a delivery."""
    return from_amqp(AMQPMessage(
        properties={"content-type": received.content_type},
        application_properties=dict(received.headers),
        application_data=body_bytes(received),
    ), JSONFormat())


def assert_every_attribute(event: BaseCloudEvent, sent: OutboundMessage) -> None:
    assert event.get_attributes() | {"time": None} == {
        "specversion": "1.0", "id": sent.message_id, "source": SOURCE,
        "type": "order.created", "subject": sent.aggregate_id,
        "datacontenttype": "application/json", "time": None,
        "partitionkey": "P-7", "aggregatetype": "order", "traceparent": TRACEPARENT,
        "schemaversion": "2",
    }
    assert event.get_time() == CREATED
    assert event.get_data() == json.loads(sent.payload)


# -- the mapping, without a broker ----------------------------------------------------


def test_binary_mode_puts_attributes_in_prefixed_headers_and_the_payload_as_body() -> None:
    sent = versioned(headers={"tenant": "acme", "cloudEvents_id": "spoofed"})
    envelope = MessageFormat("cloudevents-binary", SOURCE).envelope(sent)
    assert envelope.body == sent.payload  # unchanged, byte for byte
    assert envelope.content_type == "application/json"
    assert envelope.headers == {
        "tenant": "acme", "cloudEvents_specversion": "1.0", "cloudEvents_id": sent.message_id,
        "cloudEvents_source": SOURCE, "cloudEvents_type": "order.created",
        "cloudEvents_subject": "A-1", "cloudEvents_partitionkey": "P-7",
        "cloudEvents_aggregatetype": "order", "cloudEvents_time": "2026-11-25T09:30:15.123Z",
        "cloudEvents_traceparent": TRACEPARENT, "cloudEvents_schemaversion": "2",
    }


def test_structured_mode_embeds_the_payload_text_unchanged() -> None:
    sent = versioned()
    envelope = MessageFormat("cloudevents-structured", SOURCE).envelope(sent)
    assert envelope.content_type == CLOUDEVENTS_JSON
    assert envelope.body.endswith(f', "data": {sent.payload}}}')
    document = json.loads(envelope.body)
    assert (document["id"], document["type"], document["time"]) == (
        sent.message_id, "order.created", "2026-11-25T09:30:15.123Z")
    assert envelope.headers == {"tenant": "acme"}


def test_optional_attributes_are_left_out_when_the_row_has_none() -> None:
    sent = message(1, created_at=None)
    attributes = MessageFormat("cloudevents-binary", SOURCE).attributes(sent)
    assert not {"time", "traceparent", "schemaversion"} & set(attributes)
    assert attributes["partitionkey"] == sent.aggregate_id


def test_plain_format_is_unchanged_but_for_the_schema_version_header() -> None:
    sent = versioned()
    envelope = MessageFormat().envelope(sent)
    assert (envelope.body, envelope.content_type) == (sent.payload, "application/json")
    assert envelope.headers["schema_version"] == "2"
    assert "schema_version" not in MessageFormat().envelope(message(1)).headers


def test_the_id_of_a_received_cloudevent_in_either_mode() -> None:
    assert cloudevent_id(b"{}", "application/json", {"cloudEvents:id": "e-1"}) == "e-1"
    assert cloudevent_id({"id": "e-2"}, CLOUDEVENTS_JSON, {}) == "e-2"
    assert cloudevent_id(b'{"id": "e-3"}', CLOUDEVENTS_JSON + "; charset=utf-8", None) == "e-3"
    assert cloudevent_id(b"not json", CLOUDEVENTS_JSON, {}) is None
    assert cloudevent_id({"id": "x"}, "application/json", {"message_id": "m"}) is None


# -- through the brokers -------------------------------------------------------------


@pytest.fixture
def name() -> str:
    return f"eventferry-ce-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def queues() -> Iterator[Any]:
    made: list[BoundQueue] = []

    def make(url: str, exchange: str, **kwargs: Any) -> BoundQueue:
        made.append(BoundQueue(require_broker(url), exchange, **kwargs))
        return made[-1]

    yield make
    for queue in made:
        queue.delete()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("url", [AMQP_URL, REDIS_URL], ids=["rabbitmq", "redis"])
def test_a_consumer_using_the_sdk_reads_every_attribute(
    url: str, mode: str, name: str, queues: Any,
) -> None:
    queue = queues(url, name, routing_key="order.*")
    with cloudevents(mode):
        publisher = KombuPublisher(url=url, exchange=name)
    batch = [versioned(1), versioned(2)]
    try:
        assert publisher.publish(batch) == [PublishResult.ok()] * 2
    finally:
        publisher.close()

    for sent, received in zip(batch, queue.get_all(2), strict=True):
        assert_every_attribute(read_with_sdk(received), sent)
        assert received.properties["message_id"] == sent.message_id
        assert received.headers["tenant"] == "acme"
        if mode == "cloudevents-binary":
            assert body_bytes(received) == sent.payload.encode("utf-8")
        else:
            assert received.content_type == CLOUDEVENTS_JSON
    assert queue.is_empty()


@pytest.mark.parametrize("mode", MODES)
def test_celery_tasks_carry_the_cloudevent(
    mode: str, name: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = test_publishers.install_celery_app(monkeypatch, require_broker(AMQP_URL))
    with cloudevents(mode):
        publisher = CeleryPublisher(app=test_publishers.APP_PATH, task="billing.on_order",
                                    queue=name)
    sent = versioned()
    try:
        assert publisher.publish([sent]) == [PublishResult.ok()]
        raw = BoundQueue(AMQP_URL, name, routing_key=name, exchange_type="direct",
                         queue=name, durable=True)
        try:
            received = raw.get()
        finally:
            raw.delete()
    finally:
        app.close()
    assert received.headers["id"] == sent.message_id  # the task id: what the inbox uses
    [argument] = received.decode()[0]
    if mode == "cloudevents-binary":
        assert argument == json.loads(sent.payload)
        headers = received.headers
        assert (headers["cloudEvents_id"], headers["cloudEvents_type"],
                headers["cloudEvents_schemaversion"]) == (sent.message_id, "order.created", "2")
    else:
        assert (argument["id"], argument["source"], argument["data"]) == (
            sent.message_id, SOURCE, json.loads(sent.payload))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("mode", MODES)
def test_the_inbox_dedupes_a_cloudevent_on_its_id(mode: str, name: str, queues: Any) -> None:
    """A CloudEvent from any producer: no message_id property, the id in the event."""
    queue = queues(AMQP_URL, name, routing_key="order.*")
    envelope = MessageFormat(mode, SOURCE).envelope(versioned(message_id="ce-77"))
    with kombu.Connection(AMQP_URL) as connection:
        producer = connection.Producer()
        for _ in range(2):  # a redelivery, as the broker may make one
            producer.publish(envelope.body.encode(), exchange=name, routing_key="order.created",
                             content_type=envelope.content_type, content_encoding="utf-8",
                             headers=envelope.headers)
    handled: list[Any] = []
    callback = InboxCallback("shipping", lambda body, _: handled.append(body))

    outcomes = []
    for _ in range(2):
        received = queue.get(no_ack=False)  # the callback acks
        received.accept = {"application/json", CLOUDEVENTS_JSON}
        outcomes.append(callback(received.decode(), received))

    assert outcomes == [Delivery.HANDLED, Delivery.DUPLICATE]
    assert list(InboxMessage.objects.values_list("message_id", flat=True)) == ["ce-77"]
    assert len(handled) == 1


@pytest.mark.django_db(transaction=True)
def test_a_published_event_claimed_and_sent_reads_back_with_its_row_facts(
    name: str, queues: Any,
) -> None:
    """From publish_event to the SDK: the claim brings the row's creation time and schema
    version, whatever the database's driver makes of them."""
    queue = queues(AMQP_URL, name, routing_key="order.*")
    with transaction.atomic():
        message_id = publish_event("order.created", {"reference": "A-1"},
                                   aggregate_type="order", aggregate_id="A-1",
                                   schema_version="3")
    row = OutboxEvent.objects.get()
    [claimed] = OutboxStore().claim(1)
    with cloudevents("cloudevents-binary"):
        publisher = KombuPublisher(url=AMQP_URL, exchange=name)
    try:
        assert publisher.publish([claimed.message]) == [PublishResult.ok()]
    finally:
        publisher.close()

    event = read_with_sdk(queue.get())
    assert (event.get_id(), event.get_subject(), event.get_extension("schemaversion")) == (
        message_id, "A-1", "3")
    assert event.get_time() == row.created_at.replace(
        microsecond=row.created_at.microsecond // 1000 * 1000)
    assert event.get_data() == {"reference": "A-1"}
