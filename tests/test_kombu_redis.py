"""KombuRedisPublisher (KombuPublisher on ``redis://``) against the real Redis.

- What it stores is what kombu's own ``Producer.publish`` stores (the format pin: a kombu
  release that changes the format fails here, not in a consumer).
- A kombu Consumer reads a 2,000-message batch in order, each with its body, headers,
  content type, message id and routing key; topic wildcards route to two queues.
- Unroutable keys answer RETRY, unsendable messages GIVE_UP, each with its reason.
- A Redis that cannot be reached, resets the connection or stalls during the pipeline
  is BrokerUnavailable.
- A relay process drains 2,000 events of 20 aggregates to Redis in order per aggregate.

Redis: ``EVENTFERRY_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``), as
``tests/test_publishers.py``.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import kombu
import pytest
import redis

from eventferry_django import NewEvent
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.publishers.base import (
    BrokerUnavailable,
    OutboundMessage,
    Outcome,
    PublishResult,
)
from eventferry_django.publishers.kombu import KombuPublisher
from eventferry_django.publishers.kombu_link import CONTENT_ENCODING, prepare
from eventferry_django.publishers.kombu_redis import PERSISTENT, KombuRedisPublisher

from .tcp_proxy import TcpProxy
from .test_publishers import (
    CLOSED_PORT,
    BoundQueue,
    body_bytes,
    bound_queue,
    message,
    name,
    outcomes,
    publishers,
    redis_url,
)
from .test_relay_rabbitmq import (
    KOMBU_PUBLISHER,
    Relays,
    all_settled,
    publish,
    relays,
    statuses,
    wait_until,
)

__all__ = ["bound_queue", "name", "publishers", "redis_url", "relays"]  # fixtures


def raw_messages(url: str, queue: str) -> list[dict[str, Any]]:
    """Every message stored in ``queue``'s list, oldest first (kombu pops from the right)."""
    client = redis.Redis.from_url(url)
    try:
        return [json.loads(item) for item in reversed(client.lrange(queue, 0, -1))]
    finally:
        client.close()


def consume(queue: BoundQueue, count: int, idle: float = 10) -> list[Any]:
    """``count`` messages read by a kombu Consumer (BRPOP), in the order delivered; fails
    once none has come for ``idle`` seconds (a loaded machine reads slowly, not never)."""
    received: list[Any] = []

    def on_message(body: Any, got: Any) -> None:
        received.append(got)
        got.ack()

    connection = queue.connection
    with kombu.Consumer(connection.channel(), [queue.queue], callbacks=[on_message],
                        accept=["application/json"]):
        last = time.monotonic()
        while len(received) < count and time.monotonic() - last < idle:
            before = len(received)
            try:
                connection.drain_events(timeout=1)
            except TimeoutError:
                continue
            if len(received) > before:
                last = time.monotonic()
    assert len(received) == count, f"{len(received)} of {count} arrived"
    return received


def test_redis_urls_get_the_pipeline_publisher(redis_url: str) -> None:
    assert type(KombuPublisher(url=redis_url).delegate) is KombuRedisPublisher


def test_stored_message_is_what_kombus_producer_stores(
    redis_url: str, name: str, publishers: Any, bound_queue: Any,
) -> None:
    """The format pin: one message through the publisher and one through kombu's own
    Producer.publish, with the same arguments, land in two queues identical but for
    their delivery_tag (a fresh uuid each)."""
    first = bound_queue(redis_url, name, routing_key="order.*", queue=f"{name}-a")
    bound_queue(redis_url, name, routing_key="#", queue=f"{name}-b")
    sent = message(1, headers={"tenant": "acme"}, trace_id="00-abc-def-01", attempts=1)
    publisher = publishers(url=redis_url, exchange=name)

    assert publisher.publish([sent]) == [PublishResult.ok()]
    prepared = prepare(publisher.settings, sent)
    kombu.Producer(first.connection.channel(), exchange=first.queue.exchange).publish(
        prepared.body, routing_key=prepared.routing_key,
        content_type=prepared.envelope.content_type, content_encoding=CONTENT_ENCODING,
        headers=prepared.envelope.headers, delivery_mode=PERSISTENT,
        message_id=sent.message_id, retry=False,
    )

    for queue in (f"{name}-a", f"{name}-b"):
        ours, kombus = raw_messages(redis_url, queue)
        assert ours["properties"].pop("delivery_tag") != kombus["properties"].pop(
            "delivery_tag")
        # The whole JSON, key order included, not only the parsed values.
        assert json.dumps(ours) == json.dumps(kombus)
        assert ours["properties"]["delivery_info"] == {
            "exchange": name, "routing_key": "order.created"}
        assert ours["properties"]["body_encoding"] == "base64"


def test_kombu_consumer_reads_a_2000_message_batch_in_order(
    redis_url: str, name: str, publishers: Any, bound_queue: Any,
) -> None:
    queue = bound_queue(redis_url, name, routing_key="order.*")
    publisher = publishers(url=redis_url, exchange=name)
    batch = [message(n, topic=f"order.step{n % 7}", aggregate_id=f"A-{n % 20}",
                     headers={"n": n}) for n in range(2000)]

    assert publisher.publish(batch) == [PublishResult.ok()] * len(batch)

    received = consume(queue, len(batch))
    for sent, got in zip(batch, received, strict=True):
        assert got.properties["message_id"] == sent.message_id
        assert body_bytes(got) == sent.payload.encode("utf-8")
        assert got.content_type == "application/json"
        assert got.content_encoding == "utf-8"
        assert got.delivery_info["routing_key"] == sent.topic
        assert got.delivery_info["exchange"] == name
        assert got.properties["delivery_mode"] == 2
        assert got.headers == {
            "n": sent.headers["n"], "aggregate_type": "order",
            "aggregate_id": sent.aggregate_id, "partition_key": sent.aggregate_id,
            "attempt": 1,
        }
    assert queue.is_empty()


def topic_then_long_aggregate(sent: OutboundMessage) -> str:
    """The topic, followed by the aggregate id only when that makes the key too long."""
    return sent.topic + (f".{sent.aggregate_id}" if len(sent.aggregate_id) > 200 else "")


def test_topic_wildcards_route_to_two_queues_and_unroutable_keys_are_retried(
    redis_url: str, name: str, publishers: Any, bound_queue: Any,
) -> None:
    orders = bound_queue(redis_url, name, routing_key="order.*", queue=f"{name}-orders")
    paid = bound_queue(redis_url, name, routing_key="#.paid", queue=f"{name}-paid")
    publisher = publishers(url=redis_url, exchange=name, max_message_bytes=300,
                           routing_key=topic_then_long_aggregate)
    batch = [
        message(1, topic="order.created"),
        message(2, topic="order.paid"),  # both queues
        message(3, topic="invoice.paid"),
        message(4, topic="order.created.late"),  # '*' is one word: nowhere
        message(5, topic="order.created", payload='{"pad": "' + "x" * 400 + '"}'),
        message(6, topic="order.paid", aggregate_id="x" * 300, partition_key=None),
        message(7, topic="shipment.sent.paid"),
    ]
    results = publisher.publish(batch)

    assert outcomes(results) == [Outcome.OK, Outcome.OK, Outcome.OK, Outcome.RETRY,
                                 Outcome.GIVE_UP, Outcome.GIVE_UP, Outcome.OK]
    assert results[3].error == (
        f"unroutable: no queue bound to exchange {name!r} with routing key "
        f"'order.created.late'")
    assert "max_message_bytes" in (results[4].error or "")
    assert "255 bytes" in (results[5].error or "")
    by_queue = {q: [g.properties["message_id"] for g in consume(q, n)]
                for q, n in ((orders, 2), (paid, 3))}
    assert by_queue[orders] == [batch[0].message_id, batch[1].message_id]
    assert by_queue[paid] == [batch[1].message_id, batch[2].message_id, batch[6].message_id]
    assert orders.is_empty() and paid.is_empty()
    # A later batch on the same connection: a queue bound since is routed to.
    late = bound_queue(redis_url, name, routing_key="order.created.*", queue=f"{name}-late")
    assert outcomes(publisher.publish([message(8, topic="order.created.late")])) == [
        Outcome.OK]
    assert consume(late, 1)[0].properties["message_id"] != batch[3].message_id


def test_default_exchange_sends_to_the_queue_the_key_names(
    redis_url: str, name: str, publishers: Any, bound_queue: Any,
) -> None:
    queue = bound_queue(redis_url, name, routing_key=f"{name}-q", exchange_type="direct")
    publisher = publishers(url=redis_url, exchange="", routing_key=lambda _: f"{name}-q")
    assert outcomes(publisher.publish([message(1), message(2)])) == [Outcome.OK] * 2
    assert [raw["properties"]["delivery_info"] for raw in raw_messages(redis_url, f"{name}-q")
            ] == [{"exchange": "", "routing_key": f"{name}-q"}] * 2
    assert len(consume(queue, 2)) == 2


def test_unreachable_redis_is_broker_unavailable(publishers: Any) -> None:
    publisher = publishers(url=f"redis://127.0.0.1:{CLOSED_PORT}/0", connect_timeout=1)
    with pytest.raises(BrokerUnavailable, match="Cannot connect"):
        publisher.publish([message(1)])


@pytest.fixture
def redis_proxy(redis_url: str) -> Iterator[TcpProxy]:
    parts = kombu.Connection(redis_url)
    with TcpProxy(parts.hostname, parts.port or 6379) as running:
        yield running


def pipeline_only(redis_url: str, proxy: TcpProxy, name: str, publishers: Any
                  ) -> KombuPublisher:
    """A publisher through ``proxy`` whose first Redis command per batch is the pipeline:
    the default exchange needs no binding table."""
    publisher: KombuPublisher = publishers(
        url=f"redis://127.0.0.1:{proxy.port}/0", exchange="", routing_key=lambda _: f"{name}-q",
        connect_timeout=1, publish_timeout=1,
    )
    assert outcomes(publisher.publish([message(1)])) == [Outcome.OK]
    return publisher


def test_connection_reset_during_the_pipeline_is_broker_unavailable(
    redis_url: str, name: str, publishers: Any, redis_proxy: TcpProxy,
) -> None:
    publisher = pipeline_only(redis_url, redis_proxy, name, publishers)
    redis_proxy.cut()
    with pytest.raises(BrokerUnavailable, match="Lost the broker"):
        publisher.publish([message(n) for n in range(2, 50)])
    redis_proxy.restore()
    assert outcomes(publisher.publish([message(50)])) == [Outcome.OK]
    sent = [m["properties"]["message_id"] for m in raw_messages(redis_url, f"{name}-q")]
    assert len(sent) == 2  # nothing of the failed batch reached Redis
    redis.Redis.from_url(redis_url).delete(f"{name}-q")


def test_stalled_redis_during_the_pipeline_is_broker_unavailable(
    redis_url: str, name: str, publishers: Any, redis_proxy: TcpProxy,
) -> None:
    publisher = pipeline_only(redis_url, redis_proxy, name, publishers)
    redis_proxy.stall()
    started = time.monotonic()
    with pytest.raises(BrokerUnavailable, match=r"did not answer within 1\.0s"):
        publisher.publish([message(n) for n in range(2, 50)])
    assert time.monotonic() - started < 4
    redis_proxy.restore()
    assert outcomes(publisher.publish([message(50)])) == [Outcome.OK]
    redis.Redis.from_url(redis_url).delete(f"{name}-q")


# -- a relay process ---------------------------------------------------------------------

AGGREGATES = 20
PER_AGGREGATE = 100


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_relay_drains_2000_events_to_redis_in_order_per_aggregate(
    redis_url: str, name: str, bound_queue: Any, relays: Relays,
) -> None:
    queue = bound_queue(redis_url, name, routing_key="order.#")
    ids = publish([
        NewEvent(f"order.step{seq % 7}", {"aggregate": f"agg-{a:02d}", "seq": seq},
                 "order", f"agg-{a:02d}")
        for seq in range(PER_AGGREGATE) for a in range(AGGREGATES)
    ])
    settings = {"CLAIM_TIMEOUT": 60, "BATCH_SIZE": 200, "PUBLISHER": {
        "BACKEND": KOMBU_PUBLISHER, "OPTIONS": {"url": redis_url, "exchange": name}}}
    relays.start(settings, "relay", "--poll-interval", "0.2")
    wait_until(all_settled, timeout=120, what="the outbox to drain", relays=relays)
    summary = relays.stop()["relay"]

    received = consume(queue, len(ids))
    assert queue.is_empty()
    assert sorted(got.properties["message_id"] for got in received) == sorted(ids)
    sequences: dict[str, list[int]] = defaultdict(list)
    for got in received:
        payload = json.loads(body_bytes(got))
        assert got.headers["aggregate_id"] == payload["aggregate"]
        sequences[payload["aggregate"]].append(payload["seq"])
    assert sequences == {f"agg-{a:02d}": list(range(PER_AGGREGATE)) for a in range(AGGREGATES)}
    assert statuses() == {(Status.DONE, 0): len(ids)}
    assert summary["published"] == len(ids) and summary["retried"] == summary["dead"] == 0
    assert not OutboxEvent.objects.exclude(status=Status.DONE).exists()
