"""KombuPublisher and CeleryPublisher against the real RabbitMQ and Redis.

Brokers: ``EVENTFERRY_AMQP_URL`` (default ``amqp://guest:guest@127.0.0.1:5672//``) and
``EVENTFERRY_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``); ``make services`` starts
them. Every test uses its own exchange and queue names, so runs never see each other.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import celery
import kombu
import pytest
from django.test import override_settings
from kombu.transport.virtual import Channel as VirtualChannel

from eventferry_django.checks import check_settings
from eventferry_django.exceptions import ConfigurationError
from eventferry_django.publishers import celery as celery_options
from eventferry_django.publishers import kombu as kombu_options
from eventferry_django.publishers.amqp_confirm import AmqpConfirmPublisher
from eventferry_django.publishers.base import (
    BrokerUnavailable,
    OutboundMessage,
    Outcome,
    PublishResult,
    json_text,
)
from eventferry_django.publishers.celery import CeleryPublisher
from eventferry_django.publishers.kombu import KombuPublisher
from eventferry_django.publishers.kombu_producer import KombuProducerPublisher
from eventferry_django.publishers.kombu_redis import KombuRedisPublisher

from .amqp import require_broker
from .tcp_proxy import TcpProxy

AMQP_URL = os.environ.get("EVENTFERRY_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
REDIS_URL = os.environ.get("EVENTFERRY_REDIS_URL", "redis://127.0.0.1:6379/0")
CLOSED_PORT = 1  # nothing listens on 127.0.0.1:1


@pytest.fixture(scope="module")
def amqp_url() -> str:
    require_broker(AMQP_URL)
    return AMQP_URL


@pytest.fixture(scope="module")
def redis_url() -> str:
    require_broker(REDIS_URL)
    return REDIS_URL


@pytest.fixture
def name() -> str:
    """A fresh exchange/queue name."""
    return f"eventferry-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def publishers() -> Iterator[Callable[..., KombuPublisher]]:
    """Builds KombuPublishers and closes them after the test."""
    made: list[KombuPublisher] = []

    def make(**options: Any) -> KombuPublisher:
        publisher = KombuPublisher(**options)
        made.append(publisher)
        return publisher

    yield make
    for publisher in made:
        publisher.close()


def message(n: int = 1, **fields: Any) -> OutboundMessage:
    values: dict[str, Any] = {
        "id": n,
        "message_id": str(uuid.uuid4()),
        "topic": "order.created",
        "aggregate_type": "order",
        "aggregate_id": f"A-{n}",
        "partition_key": None,
        # Odd spacing, key order and non-ASCII: a re-serialized body would differ.
        "payload": f'{{"n":{n},  "name": "Zoë",\t"total": 12.50}}',
        "headers": {},
        "trace_id": None,
        "attempts": 0,
    }
    values.update(fields)
    return OutboundMessage(**values)


class BoundQueue:
    """A queue bound to ``exchange`` on a real broker, read with kombu's ``get``."""

    def __init__(
        self, url: str, exchange: str, routing_key: str = "#", exchange_type: str = "topic",
        queue: str | None = None, durable: bool = False,
    ) -> None:
        self.connection = kombu.Connection(url)
        channel = self.connection.channel()
        if not isinstance(channel, VirtualChannel):
            channel.auto_decode = False  # py-amqp: keep bodies as the bytes received
        self.queue = kombu.Queue(
            queue or f"{exchange}-q", kombu.Exchange(exchange, exchange_type, durable=True),
            routing_key=routing_key, auto_delete=False, durable=durable,
        )(channel)
        self.queue.declare()

    def get(self, timeout: float = 5, *, no_ack: bool = True) -> Any:
        """The next message; with ``no_ack`` False, left for the caller to ack."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            received = self.queue.get(no_ack=no_ack)
            if received is not None:
                return received
            time.sleep(0.02)
        raise AssertionError(f"nothing arrived on {self.queue.name} within {timeout}s")

    def get_all(self, count: int) -> list[Any]:
        return [self.get() for _ in range(count)]

    def is_empty(self) -> bool:
        return self.queue.get(no_ack=True) is None

    def delete(self) -> None:
        """Remove the queue and the exchange: durable exchanges would outlive the test."""
        self.queue.delete()
        self.queue.exchange.delete()
        self.connection.release()


@pytest.fixture
def bound_queue() -> Iterator[Callable[..., BoundQueue]]:
    made: list[BoundQueue] = []

    def make(url: str, exchange: str, **kwargs: Any) -> BoundQueue:
        queue = BoundQueue(url, exchange, **kwargs)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        queue.delete()


def body_bytes(received: Any) -> bytes:
    body = received.body
    return body if isinstance(body, bytes) else body.encode(received.content_encoding)


def outcomes(results: list[PublishResult]) -> list[Outcome]:
    return [r.outcome for r in results]


def route_by_aggregate(message: OutboundMessage) -> str:
    """A routing_key callable, named by dotted path in a test."""
    return f"agg.{message.aggregate_type}.{message.aggregate_id}"


# -- RabbitMQ ------------------------------------------------------------------------


def test_rabbitmq_batch_arrives_in_order_with_body_id_headers_and_persistence(
    amqp_url: str, name: str, publishers: Any, bound_queue: Any,
) -> None:
    queue = bound_queue(amqp_url, name)
    publisher = publishers(url=amqp_url, exchange=name)
    batch = [
        message(1, trace_id="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                headers={"tenant": "acme", "aggregate_id": "spoofed", "attempt": 99},
                attempts=2),
        message(2, topic="order.paid", partition_key="customer-7"),
        *[message(n, topic=f"order.step{n}") for n in range(3, 8)],
    ]

    assert publisher.publish(batch) == [PublishResult.ok()] * len(batch)

    received = queue.get_all(len(batch))
    assert queue.is_empty()
    for sent, got in zip(batch, received, strict=True):
        assert body_bytes(got) == sent.payload.encode("utf-8")
        assert got.content_type == "application/json"
        assert got.properties["message_id"] == sent.message_id
        assert got.properties["delivery_mode"] == 2
        assert got.delivery_info["routing_key"] == sent.topic
        assert got.delivery_info["exchange"] == name
    first, second = received[0], received[1]
    assert first.headers == {
        "tenant": "acme",
        "aggregate_type": "order",
        "aggregate_id": "A-1",  # reserved names win over the event's own
        "partition_key": "A-1",
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "attempt": 3,
    }
    assert second.headers == {
        "aggregate_type": "order", "aggregate_id": "A-2", "partition_key": "customer-7",
        "attempt": 1,
    }


def test_rabbitmq_routing_key_template_and_callable(
    amqp_url: str, name: str, publishers: Any, bound_queue: Any,
) -> None:
    queue = bound_queue(amqp_url, name)
    by_template = publishers(
        url=amqp_url, exchange=name, routing_key="{aggregate_type}.{topic}.{partition_key}",
    )
    by_callable = publishers(
        url=amqp_url, exchange=name, routing_key="tests.test_publishers.route_by_aggregate",
    )
    by_template.publish([message(1, partition_key="p")])
    by_callable.publish([message(2)])
    keys = [got.delivery_info["routing_key"] for got in queue.get_all(2)]
    assert keys == ["order.order.created.p", "agg.order.A-2"]


def test_rabbitmq_unroutable_is_retried_too_large_and_unencodable_are_given_up(
    amqp_url: str, name: str, publishers: Any, bound_queue: Any,
) -> None:
    queue = bound_queue(amqp_url, name, routing_key="order.*")
    publisher = publishers(url=amqp_url, exchange=name, max_message_bytes=100)
    batch = [
        message(1),
        message(2, topic="invoice.sent"),  # no queue bound for it
        message(3, payload='{"pad": "' + "x" * 200 + '"}'),
        message(4, headers={"huge": 2**70}),  # no AMQP integer type holds it
        message(5),
    ]

    results = publisher.publish(batch)

    assert outcomes(results) == [
        Outcome.OK, Outcome.RETRY, Outcome.GIVE_UP, Outcome.GIVE_UP, Outcome.OK,
    ]
    assert results[1].error is not None and results[1].error.startswith("unroutable")
    assert name in results[1].error and "invoice.sent" in results[1].error
    assert "max_message_bytes" in (results[2].error or "")
    assert "encoded" in (results[3].error or "")
    got = [g.properties["message_id"] for g in queue.get_all(2)]
    assert got == [batch[0].message_id, batch[4].message_id]
    assert queue.is_empty()  # neither the large nor the unencodable one went out
    # Giving up on a message did not spoil the connection.
    assert outcomes(publisher.publish([message(6)])) == [Outcome.OK]


def test_rabbitmq_routing_key_errors_are_the_message_fault(
    amqp_url: str, name: str, publishers: Any, bound_queue: Any,
) -> None:
    bound_queue(amqp_url, name)
    publisher = publishers(url=amqp_url, exchange=name, routing_key="{topic}" + "x" * 250)
    results = publisher.publish([message(1)])
    assert outcomes(results) == [Outcome.GIVE_UP]
    assert "255 bytes" in (results[0].error or "")


def test_rabbitmq_missing_exchange_without_declaring_is_broker_unavailable(
    amqp_url: str, name: str, publishers: Any,
) -> None:
    publisher = publishers(url=amqp_url, exchange=name, declare_exchange=False)
    with pytest.raises(BrokerUnavailable, match="NOT_FOUND"):
        publisher.publish([message(1)])


@pytest.mark.parametrize("url", [
    f"amqp://guest:guest@127.0.0.1:{CLOSED_PORT}//",
    f"redis://127.0.0.1:{CLOSED_PORT}/0",
])
def test_unreachable_broker_raises_within_the_connect_timeout(url: str, publishers: Any) -> None:
    publisher = publishers(url=url, connect_timeout=1)
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable, match="Cannot connect"):
        publisher.publish([message(1)])
    assert time.monotonic() - started < 5


def test_wrong_credentials_are_broker_unavailable(amqp_url: str, publishers: Any) -> None:
    url = amqp_url.replace("guest:guest@", "guest:wrong-password@")
    with pytest.raises(BrokerUnavailable) as raised:
        publishers(url=url, connect_timeout=1).publish([message(1)])
    assert "wrong-password" not in str(raised.value)  # the URL in the message is masked


@pytest.fixture
def proxy(amqp_url: str) -> Iterator[TcpProxy]:
    parts = kombu.Connection(amqp_url)
    with TcpProxy(parts.hostname, parts.port or 5672) as running:
        yield running


def proxied(amqp_url: str, proxy: TcpProxy) -> str:
    parts = kombu.Connection(amqp_url)
    vhost = parts.virtual_host if parts.virtual_host != "/" else ""
    return f"amqp://{parts.userid}:{parts.password}@127.0.0.1:{proxy.port}/{vhost}"


def test_rabbitmq_connection_reused_lost_and_regained(
    amqp_url: str, name: str, publishers: Any, bound_queue: Any, proxy: TcpProxy,
) -> None:
    queue = bound_queue(amqp_url, name)
    publisher = publishers(url=proxied(amqp_url, proxy), exchange=name, connect_timeout=1)

    assert outcomes(publisher.publish([message(1)])) == [Outcome.OK]
    assert outcomes(publisher.publish([message(2)])) == [Outcome.OK]
    assert proxy.accepted == 1  # one connection for both batches

    proxy.cut()
    with pytest.raises(BrokerUnavailable):
        publisher.publish([message(3)])
    with pytest.raises(BrokerUnavailable, match="Cannot connect"):  # refused while cut
        publisher.publish([message(4)])

    proxy.restore()
    fifth = message(5)
    assert outcomes(publisher.publish([fifth])) == [Outcome.OK]
    assert proxy.accepted == 2
    ids = [g.properties["message_id"] for g in queue.get_all(3)]
    assert ids[-1] == fifth.message_id


def test_rabbitmq_silent_broker_times_out_instead_of_hanging(
    amqp_url: str, name: str, publishers: Any, bound_queue: Any, proxy: TcpProxy,
) -> None:
    bound_queue(amqp_url, name)
    publisher = publishers(
        url=proxied(amqp_url, proxy), exchange=name, connect_timeout=1, publish_timeout=1,
    )
    assert outcomes(publisher.publish([message(1)])) == [Outcome.OK]

    proxy.stall()
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable, match=r"did not answer within 1\.0s"):
        publisher.publish([message(n) for n in range(2, 12)])
    assert time.monotonic() - started < 4

    proxy.restore()
    assert outcomes(publisher.publish([message(12)])) == [Outcome.OK]
    assert proxy.accepted == 2


def test_close_releases_and_a_later_publish_reconnects(
    amqp_url: str, name: str, publishers: Any, bound_queue: Any, proxy: TcpProxy,
) -> None:
    bound_queue(amqp_url, name)
    publisher = publishers(url=proxied(amqp_url, proxy), exchange=name)
    publisher.publish([message(1)])
    publisher.close()
    publisher.close()  # idempotent
    assert outcomes(publisher.publish([message(2)])) == [Outcome.OK]
    assert proxy.accepted == 2
    assert publisher.publish([]) == []


# -- Redis and memory ----------------------------------------------------------------


def test_redis_publish_and_consume(
    redis_url: str, name: str, publishers: Any, bound_queue: Any,
) -> None:
    queue = bound_queue(redis_url, name, routing_key="order.*")
    publisher = publishers(url=redis_url, exchange=name)
    batch = [message(1, headers={"tenant": "acme"}, trace_id="00-abc-def-01"), message(2),
             message(3, topic="invoice.sent")]

    results = publisher.publish(batch)

    assert outcomes(results) == [Outcome.OK, Outcome.OK, Outcome.RETRY]
    assert (results[2].error or "").startswith("unroutable")
    received = queue.get_all(2)
    for sent, got in zip(batch, received, strict=False):
        assert body_bytes(got) == sent.payload.encode("utf-8")
        assert got.properties["message_id"] == sent.message_id
        assert got.properties["delivery_mode"] == 2
        assert got.content_type == "application/json"
    assert received[0].headers == {
        "tenant": "acme", "aggregate_type": "order", "aggregate_id": "A-1",
        "partition_key": "A-1", "traceparent": "00-abc-def-01", "attempt": 1,
    }
    assert queue.is_empty()


def test_memory_transport_in_process(name: str, publishers: Any, bound_queue: Any) -> None:
    queue = bound_queue("memory://", name)
    publisher = publishers(url="memory://", exchange=name)
    sent = message(1)

    assert publisher.publish([sent]) == [PublishResult.ok()]

    got = queue.get()
    assert body_bytes(got) == sent.payload.encode("utf-8")
    assert got.properties["message_id"] == sent.message_id
    assert got.headers["aggregate_id"] == "A-1"


# -- Celery --------------------------------------------------------------------------


APP_PATH = "tests.test_publishers.CELERY_APP"  # set by the fixtures below


def install_celery_app(monkeypatch: pytest.MonkeyPatch, url: str) -> celery.Celery:
    app = celery.Celery("eventferry-test", broker=url, set_as_current=False)
    app.conf.broker_connection_timeout = 1
    monkeypatch.setattr(sys.modules[__name__], "CELERY_APP", app, raising=False)
    return app


@pytest.fixture(params=["amqp", "redis"])
def celery_app(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> Iterator[celery.Celery]:
    app = install_celery_app(monkeypatch, request.getfixturevalue(f"{request.param}_url"))
    yield app
    app.close()


def test_celery_sends_tasks_with_message_id_and_payload(
    celery_app: celery.Celery, name: str,
) -> None:
    publisher = CeleryPublisher(
        app=APP_PATH,
        task={"order.created": "billing.on_order_created", "*": "audit.on_event"},
        queue=name,
    )
    batch = [
        message(1, headers={"tenant": "acme", "id": "must-not-replace-the-task-id"},
                trace_id="00-abc-def-01"),
        message(2, topic="invoice.sent", payload="[1, 2, 3]"),
    ]

    assert publisher.publish(batch) == [PublishResult.ok()] * 2

    raw = BoundQueue(celery_app.conf.broker_url, name, routing_key=name,
                     exchange_type="direct", queue=name, durable=True)  # as Celery has it
    try:
        received = raw.get_all(len(batch))
        assert raw.is_empty()
    finally:
        raw.delete()
    tasks = [(r.headers["task"], r.headers["id"], r.decode()[0]) for r in received]
    assert tasks == [
        ("billing.on_order_created", batch[0].message_id, [json.loads(batch[0].payload)]),
        ("audit.on_event", batch[1].message_id, [[1, 2, 3]]),
    ]
    assert received[0].decode()[1] == {}
    headers = received[0].headers
    assert (headers["tenant"], headers["aggregate_id"], headers["traceparent"]) == (
        "acme", "A-1", "00-abc-def-01",
    )
    assert (headers["partition_key"], headers["attempt"]) == ("A-1", 1)


def test_celery_topic_without_task_is_given_up(celery_app: celery.Celery, name: str) -> None:
    publisher = CeleryPublisher(
        app=APP_PATH, task={"order.created": "billing.on_order_created"}, queue=name,
    )
    results = publisher.publish([message(1, topic="invoice.sent"), message(2, payload="{nope")])
    assert outcomes(results) == [Outcome.GIVE_UP, Outcome.GIVE_UP]
    assert "no Celery task for topic 'invoice.sent'" in (results[0].error or "")
    assert "not JSON" in (results[1].error or "")


def test_celery_unreachable_broker_is_broker_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = install_celery_app(monkeypatch, f"amqp://guest:guest@127.0.0.1:{CLOSED_PORT}//")
    try:
        publisher = CeleryPublisher(app=APP_PATH, task="anything")
        started = time.monotonic()
        with pytest.raises(BrokerUnavailable, match="Connection refused"):
            publisher.publish([message(1)])
        assert time.monotonic() - started < 5  # Celery's default retry policy, ~1 s
    finally:
        app.close()


def test_celery_broker_lost_and_regained(
    amqp_url: str, name: str, proxy: TcpProxy, monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = install_celery_app(monkeypatch, proxied(amqp_url, proxy))
    publisher = CeleryPublisher(app=APP_PATH, task="audit.on_event", queue=name)
    raw = BoundQueue(amqp_url, name, routing_key=name, exchange_type="direct", queue=name,
                     durable=True)
    try:
        assert outcomes(publisher.publish([message(1)])) == [Outcome.OK]
        # Without publisher confirms OK means written to the socket: the cut below could
        # reset the proxy before it forwarded the task, so the cut waits for its arrival.
        assert raw.get().headers["aggregate_id"] == "A-1"
        proxy.cut()
        with pytest.raises(BrokerUnavailable):
            publisher.publish([message(2)])
        proxy.restore()
        assert outcomes(publisher.publish([message(3)])) == [Outcome.OK]
        assert raw.get().headers["aggregate_id"] == "A-3"
        assert raw.is_empty()
    finally:
        app.close()
        raw.delete()


# -- check() -------------------------------------------------------------------------


def ids_and_messages(found: list[Any]) -> list[tuple[str, str]]:
    return [(m.id, m.msg) for m in found]


def test_kombu_valid_options_pass() -> None:
    assert KombuPublisher.check({"url": AMQP_URL}) == []
    assert KombuPublisher.check({
        "url": "redis://localhost:6379/1", "exchange": "", "exchange_type": "direct",
        "routing_key": route_by_aggregate, "connect_timeout": 0.5, "publish_timeout": 3,
        "declare_exchange": False, "max_message_bytes": 1024,
    }) == []


@pytest.mark.parametrize(("options", "check_id", "named"), [
    ({}, "eventferry.E030", "'url'"),
    ({"url": "  "}, "eventferry.E030", "'url'"),
    ({"url": AMQP_URL, "exchnage": "x"}, "eventferry.E031", "'exchnage'"),
    ({"url": "bogus://host"}, "eventferry.E032", "'bogus://host'"),
    ({"url": AMQP_URL, "exchange": 7}, "eventferry.E032", "OPTIONS['exchange'] is 7"),
    ({"url": AMQP_URL, "exchange_type": "x-delayed"}, "eventferry.E032", "'x-delayed'"),
    ({"url": "memory://", "exchange_type": "headers"}, "eventferry.E032", "'headers'"),
    ({"url": AMQP_URL, "routing_key": "{topic}.{tenant}"}, "eventferry.E032", "'tenant'"),
    ({"url": AMQP_URL, "routing_key": "{}"}, "eventferry.E032", "OPTIONS['routing_key']"),
    ({"url": AMQP_URL, "routing_key": "orders.routing.nope"}, "eventferry.E032",
     "'orders.routing.nope'"),
    ({"url": AMQP_URL, "routing_key": "tests.test_publishers.AMQP_URL"}, "eventferry.E032",
     "not callable"),
    ({"url": AMQP_URL, "routing_key": 5}, "eventferry.E032", "OPTIONS['routing_key'] is 5"),
    ({"url": AMQP_URL, "connect_timeout": 0}, "eventferry.E032", "OPTIONS['connect_timeout'] is 0"),
    ({"url": AMQP_URL, "publish_timeout": "10"}, "eventferry.E032", "OPTIONS['publish_timeout'] is '10'"),
    ({"url": AMQP_URL, "publish_timeout": True}, "eventferry.E032", "OPTIONS['publish_timeout'] is True"),
    ({"url": AMQP_URL, "declare_exchange": "yes"}, "eventferry.E032", "OPTIONS['declare_exchange'] is 'yes'"),
    ({"url": AMQP_URL, "max_message_bytes": 0}, "eventferry.E032", "OPTIONS['max_message_bytes'] is 0"),
    ({"url": AMQP_URL, "max_message_bytes": 1.5}, "eventferry.E032", "OPTIONS['max_message_bytes'] is 1.5"),
])
def test_kombu_check_names_the_bad_option(
    options: dict[str, Any], check_id: str, named: str,
) -> None:
    found = ids_and_messages(KombuPublisher.check(options))
    assert len(found) == 1, found
    assert found[0][0] == check_id
    assert named in found[0][1]
    with pytest.raises(ConfigurationError, match="KombuPublisher"):
        KombuPublisher(**options)


def test_kombu_check_without_kombu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "kombu", None)  # import kombu now raises ImportError
    found = KombuPublisher.check({"url": AMQP_URL})
    assert [m.id for m in found] == ["eventferry.E033"]
    assert found[0].hint == 'pip install "eventferry-django[kombu]"'


def test_publisher_check_runs_in_system_checks() -> None:
    setting = {"PUBLISHER": {
        "BACKEND": "eventferry_django.publishers.kombu.KombuPublisher",
        "OPTIONS": {"exchange": "orders"},
    }}
    with override_settings(EVENTFERRY=setting):
        assert [m.id for m in check_settings()] == ["eventferry.E030"]


def test_celery_valid_options_pass() -> None:
    assert CeleryPublisher.check({"task": "audit.on_event"}) == []
    assert CeleryPublisher.check({
        "task": {"order.created": "a.b", "*": "c.d"}, "app": "celery.current_app",
        "queue": "events", "publish_timeout": 2,
    }) == []


@pytest.mark.parametrize(("options", "check_id", "named"), [
    ({}, "eventferry.E040", "'task'"),
    ({"task": " "}, "eventferry.E040", "'task'"),
    ({"task": "a.b", "queues": "x"}, "eventferry.E041", "'queues'"),
    ({"task": {}}, "eventferry.E042", "OPTIONS['task'] is {}"),
    ({"task": {"order.created": 3}}, "eventferry.E042", "'order.created': 3"),
    ({"task": ["a.b"]}, "eventferry.E042", "['a.b']"),
    ({"task": "a.b", "app": "no.such.module.app"}, "eventferry.E042", "'no.such.module.app'"),
    ({"task": "a.b", "app": "tests.test_publishers.AMQP_URL"}, "eventferry.E042",
     "not a Celery app"),
    ({"task": "a.b", "queue": ""}, "eventferry.E042", "OPTIONS['queue'] is ''"),
    ({"task": "a.b", "publish_timeout": -1}, "eventferry.E042", "OPTIONS['publish_timeout'] is -1"),
])
def test_celery_check_names_the_bad_option(
    options: dict[str, Any], check_id: str, named: str,
) -> None:
    found = ids_and_messages(CeleryPublisher.check(options))
    assert len(found) == 1, found
    assert found[0][0] == check_id
    assert named in found[0][1]


def test_celery_check_without_celery(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "celery", None)
    found = CeleryPublisher.check({"task": "a.b"})
    assert [m.id for m in found] == ["eventferry.E043"]
    assert found[0].hint == 'pip install "eventferry-django[celery]"'


def test_celery_check_resolves_the_apps_broker_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    """As KombuPublisher's check does for its url: a broker whose transport (or its client
    library) is missing is reported before the relay starts, not at the first publish."""
    install_celery_app(monkeypatch, "nosuchbroker://user:s3cret@localhost//")
    found = CeleryPublisher.check({"task": "a.b", "app": APP_PATH})
    assert [m.id for m in found] == ["eventferry.E044"]
    assert "the Celery app's broker nosuchbroker://user:****@localhost// cannot be used" in (
        found[0].msg)
    assert "s3cret" not in found[0].msg


def test_publishers_describe_themselves_without_passwords(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install_celery_app(monkeypatch, "amqp://shop:s3cret@127.0.0.1:5672//")
    publisher = CeleryPublisher(app=APP_PATH, task={"order.created": "billing.on_order"})
    assert publisher.describe() == (
        "CeleryPublisher app 'eventferry-test' broker amqp://shop:****@127.0.0.1:5672// task "
        "order.created -> billing.on_order")
    assert KombuPublisher(url="redis://:s3cret@127.0.0.1:6379/0").describe() == (
        "KombuPublisher redis://:****@127.0.0.1:6379/0 exchange 'eventferry' (topic)")


def test_kombu_check_masks_the_password_of_a_bad_url() -> None:
    found = ids_and_messages(KombuPublisher.check({"url": "nosuchbroker://u:s3cret@h//"}))
    assert [check_id for check_id, _ in found] == ["eventferry.E032"]
    assert "nosuchbroker://u:****@h//" in found[0][1] and "s3cret" not in found[0][1]


# -- one BACKEND, two publishers; OPTIONS declared once ------------------------------


@pytest.mark.parametrize(("url", "exchange_type", "chosen"), [
    ("amqp://guest:guest@127.0.0.1:5672//", "topic", AmqpConfirmPublisher),
    ("amqps://guest:guest@127.0.0.1:5671//", "topic", AmqpConfirmPublisher),
    ("pyamqp://guest:guest@127.0.0.1:5672//", "topic", AmqpConfirmPublisher),
    ("redis://127.0.0.1:6379/0", "topic", KombuRedisPublisher),
    ("rediss://127.0.0.1:6380/0", "direct", KombuRedisPublisher),
    ("redis://127.0.0.1:6379/0", "fanout", KombuProducerPublisher),  # pub/sub: kombu's
    ("sentinel://127.0.0.1:26379", "topic", KombuProducerPublisher),
    ("memory://", "topic", KombuProducerPublisher),
])
def test_kombu_publisher_chooses_its_delegate_by_transport_without_connecting(
    url: str, exchange_type: str, chosen: type,
) -> None:
    publisher = KombuPublisher(url=url, exchange="orders", exchange_type=exchange_type)
    assert type(publisher.delegate) is chosen
    assert publisher.delegate.settings is publisher.settings
    assert publisher.describe().startswith("KombuPublisher ")


def test_kombu_publisher_takes_its_defaults_from_the_options_table() -> None:
    """The OPTIONS table is the only place a default is spelled: what it declares is what
    a publisher given only its URL gets."""
    publisher = KombuPublisher(url="memory://")
    table = kombu_options.OPTIONS
    assert publisher.options == {**table.defaults(), "url": "memory://"}
    settings = publisher.settings
    assert (settings.exchange, settings.exchange_type, settings.connect_timeout,
            settings.publish_timeout, settings.declare_exchange, settings.max_message_bytes
            ) == tuple(table[name].default for name in (
                "exchange", "exchange_type", "connect_timeout", "publish_timeout",
                "declare_exchange", "max_message_bytes"))


def test_celery_publisher_takes_its_defaults_from_the_options_table() -> None:
    publisher = CeleryPublisher(task="orders.handle")
    table = celery_options.OPTIONS
    assert publisher.options == {**table.defaults(), "task": "orders.handle"}
    assert (publisher.app_path, publisher.queue, publisher.publish_timeout) == (
        table["app"].default, table["queue"].default, table["publish_timeout"].default)


@pytest.mark.parametrize("value", [1, -7, 10**30, True, False, None, 1.5, float("inf"), "é\n",
                                   {"a": [1, "ü", None]}, []])
def test_json_text_is_what_json_dumps_writes(value: object) -> None:
    """The headers' JSON (Kafka, NATS, CloudEvents) comes from encoders made once, and an
    int skips them: the same text either way (a bool is no int here: ``true``)."""
    assert json_text(value) == json.dumps(value, ensure_ascii=False)
    assert json_text(value, compact=True) == json.dumps(value, ensure_ascii=False,
                                                        separators=(",", ":"))
