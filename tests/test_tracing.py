"""W3C trace context: publish_event stores the active span's ``traceparent`` in
``trace_id`` and the KombuPublisher hands it to RabbitMQ as the ``traceparent`` header.
Needs ``opentelemetry-api`` and ``opentelemetry-sdk``; the broker as in test_publishers
(``EVENTFERRY_AMQP_URL``, default ``amqp://guest:guest@127.0.0.1:5672//``)."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from typing import Any

import kombu
import pytest
from django.db import transaction
from opentelemetry import context, propagate, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import format_span_id, format_trace_id

from eventferry_django import publish_event
from eventferry_django import tracing as eventferry_tracing
from eventferry_django.conf import get_settings
from eventferry_django.models import OutboxEvent
from eventferry_django.publishers.kombu import KombuPublisher
from eventferry_django.relay import Relay, RelayConfig

AMQP_URL = os.environ.get("EVENTFERRY_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")

#: A tracer of its own: the test does not touch OpenTelemetry's global provider.
tracer = TracerProvider().get_tracer("eventferry-tests")


def publish(topic: str = "traced", aggregate_id: str = "1", **headers: Any) -> OutboxEvent:
    with transaction.atomic():
        message_id = publish_event(topic, {"n": 1}, aggregate_type="order",
                                   aggregate_id=aggregate_id, headers=headers or None)
    return OutboxEvent.objects.get(message_id=message_id)


def traceparent_of(span: trace.Span) -> str:
    span_context = span.get_span_context()
    return (f"00-{format_trace_id(span_context.trace_id)}-"
            f"{format_span_id(span_context.span_id)}-{span_context.trace_flags:02x}")


@pytest.mark.django_db
def test_publish_event_stores_the_active_spans_traceparent() -> None:
    with tracer.start_as_current_span("place order") as span:
        event = publish()
    assert event.trace_id == traceparent_of(span)
    match = TRACEPARENT.match(event.trace_id or "")
    assert match is not None, event.trace_id
    assert int(match[1], 16) == span.get_span_context().trace_id
    assert int(match[2], 16) == span.get_span_context().span_id
    assert int(match[3], 16) & 0x01  # sampled (newer SDKs also set 0x02, "random")


@pytest.mark.django_db
def test_each_event_carries_the_span_current_when_it_was_published() -> None:
    with tracer.start_as_current_span("request") as outer:
        first = publish(aggregate_id="1")
        with tracer.start_as_current_span("step") as inner:
            second = publish(aggregate_id="2")
    assert first.trace_id == traceparent_of(outer)
    assert second.trace_id == traceparent_of(inner)
    # One trace, two spans.
    assert first.trace_id[3:35] == second.trace_id[3:35]
    assert first.trace_id != second.trace_id


@pytest.mark.django_db
def test_an_incoming_trace_context_is_carried_without_a_local_span() -> None:
    incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    token = context.attach(propagate.extract({"traceparent": incoming}))
    try:
        event = publish()
    finally:
        context.detach(token)
    assert event.trace_id == incoming


@pytest.mark.django_db
def test_without_an_active_span_trace_id_is_null() -> None:
    assert trace.get_current_span() is trace.INVALID_SPAN
    assert publish().trace_id is None


@pytest.mark.django_db
def test_the_api_without_an_sdk_records_nothing() -> None:
    # opentelemetry-api alone: spans are non-recording and invalid, nothing to carry.
    with trace.NoOpTracerProvider().get_tracer("x").start_as_current_span("no-op"):
        assert publish().trace_id is None


@pytest.mark.django_db
def test_without_opentelemetry_nothing_breaks_and_trace_id_is_null(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As if OpenTelemetry were not installed (tracing.py's ImportError branch).
    monkeypatch.setattr(eventferry_tracing, "propagate", None)
    with tracer.start_as_current_span("ignored"):
        event = publish()
    assert event.trace_id is None
    assert eventferry_tracing.current_traceparent() is None


# -- through the relay to RabbitMQ ----------------------------------------------------
@pytest.fixture
def queue() -> Iterator[tuple[str, Any]]:
    """A fresh topic exchange on the real RabbitMQ and a queue bound to it with '#'."""
    name = f"eventferry-trace-{uuid.uuid4().hex[:12]}"
    connection = kombu.Connection(AMQP_URL, connect_timeout=2)
    try:
        connection.ensure_connection(max_retries=0)
    except Exception as exc:
        pytest.fail(f"{connection.as_uri()} is unreachable ({exc!r}); run `make services`.")
    bound = kombu.Queue(f"{name}-q", kombu.Exchange(name, "topic", durable=True),
                        routing_key="#", auto_delete=False, durable=False)(connection.channel())
    bound.declare()
    try:
        yield name, bound
    finally:
        bound.delete()
        bound.exchange.delete()
        connection.release()


def relay_to(exchange: str) -> Relay:
    settings = get_settings()
    return Relay(
        RelayConfig(batch_size=50, until_empty=True, claim_timeout=60,
                    max_attempts=settings.max_attempts),
        publisher=KombuPublisher(url=AMQP_URL, exchange=exchange),
    )


def receive(bound: Any, count: int) -> list[Any]:
    received = []
    for _ in range(count):
        message = bound.get(no_ack=True)
        assert message is not None, f"only {len(received)} of {count} messages arrived"
        received.append(message)
    assert bound.get(no_ack=True) is None
    return received


@pytest.mark.django_db(transaction=True)
def test_kombu_publisher_sends_the_traceparent_header(queue: tuple[str, Any]) -> None:
    exchange, bound = queue
    with tracer.start_as_current_span("checkout") as span:
        traced = publish("order.created", "1", tenant="acme")
    untraced = publish("order.created", "2")
    # An event's own traceparent passes only when the row has none.
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with tracer.start_as_current_span("overridden"):
        spoofed = publish("order.created", "3", traceparent=own)
    stats = relay_to(exchange).run()
    assert stats.published == 3

    by_id = {m.properties["message_id"]: m for m in receive(bound, 3)}
    headers = by_id[traced.message_id].headers
    assert headers["traceparent"] == traced.trace_id == traceparent_of(span)
    assert headers["tenant"] == "acme"
    assert "traceparent" not in by_id[untraced.message_id].headers
    assert spoofed.trace_id is not None and spoofed.trace_id != own
    assert by_id[spoofed.message_id].headers["traceparent"] == spoofed.trace_id


@pytest.mark.django_db(transaction=True)
def test_an_events_own_traceparent_passes_when_the_row_has_none(
    queue: tuple[str, Any],
) -> None:
    exchange, bound = queue
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    event = publish("order.created", "1", traceparent=own)
    assert event.trace_id is None
    assert relay_to(exchange).run().published == 1
    (message,) = receive(bound, 1)
    assert message.headers["traceparent"] == own
