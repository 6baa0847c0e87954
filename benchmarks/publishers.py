"""Throughput of KombuPublisher's pipelined confirms against one confirm per message.

(On RabbitMQ KombuPublisher's work is done by AmqpConfirmPublisher, on Redis by
KombuRedisPublisher, one pipeline a batch: the rows measure what users configure. The
Redis row "kombu Producer per message" is what Redis got before, KombuProducerPublisher,
still used for fanout exchanges and other kombu transports.) The last lines give each
Redis row as a share of RabbitMQ's pipelined confirms (issue 28's target: 70%).

    python benchmarks/publishers.py [--batches 20] [--batch-size 500]

Needs RabbitMQ (``EVENTFERRY_AMQP_URL``, default ``amqp://guest:guest@127.0.0.1:5672//``);
Redis (``EVENTFERRY_REDIS_URL``) is measured too when it answers. Messages carry a
~200-byte JSON payload and land in a temporary queue, so every one is routed and
confirmed. Timing lives here rather than in the tests, where it would be flaky.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import kombu

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# The publishers read EVENTFERRY (the message format); nothing here touches a database.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.settings")

import django

django.setup()

from eventferry_django.publishers.base import (  # noqa: E402
    BrokerUnavailable,
    OutboundMessage,
    Outcome,
    broker_headers,
)
from eventferry_django.publishers.kombu import KombuPublisher  # noqa: E402
from eventferry_django.publishers.kombu_producer import KombuProducerPublisher  # noqa: E402

AMQP_URL = os.environ.get("EVENTFERRY_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
REDIS_URL = os.environ.get("EVENTFERRY_REDIS_URL", "redis://127.0.0.1:6379/0")

PublishBatch = Callable[[Sequence[OutboundMessage]], None]


def make_batch(size: int) -> list[OutboundMessage]:
    return [
        OutboundMessage(
            id=n, message_id=str(uuid.uuid4()), topic="order.created", aggregate_type="order",
            aggregate_id=str(n), partition_key=None,
            payload=f'{{"order": {n}, "customer": "c-42", "note": "{"x" * 150}"}}',
            headers={"tenant": "acme"},
        )
        for n in range(size)
    ]


class TemporaryQueue:
    """A queue bound to ``exchange`` so that every benchmark message is routed."""

    def __init__(self, url: str, exchange: str) -> None:
        self.connection = kombu.Connection(url)
        self.queue = kombu.Queue(
            f"{exchange}-q", kombu.Exchange(exchange, "topic", durable=True),
            routing_key="#", durable=False,
        )(self.connection.channel())
        self.queue.declare()

    def delete(self) -> None:
        self.queue.delete()
        self.queue.exchange.delete()
        self.connection.release()


def kombu_publisher(url: str, exchange: str) -> tuple[PublishBatch, Callable[[], None]]:
    publisher = KombuPublisher(url=url, exchange=exchange)

    def publish(batch: Sequence[OutboundMessage]) -> None:
        results = publisher.publish(batch)
        assert all(r.outcome is Outcome.OK for r in results), results[:3]

    return publish, publisher.close


def kombu_producer_each(url: str, exchange: str) -> tuple[PublishBatch, Callable[[], None]]:
    """Redis before its pipeline: kombu's Producer, two round trips per message."""
    publisher = KombuProducerPublisher(KombuPublisher(url=url, exchange=exchange).settings)

    def publish(batch: Sequence[OutboundMessage]) -> None:
        results = publisher.publish(batch)
        assert all(r.outcome is Outcome.OK for r in results), results[:3]

    return publish, publisher.close


def naive_confirm_each(url: str, exchange: str) -> tuple[PublishBatch, Callable[[], None]]:
    """What ``confirm_publish=True`` gives: each publish waits for its own ack."""
    connection = kombu.Connection(url, transport_options={"confirm_publish": True})
    producer = kombu.Producer(
        connection.channel(), exchange=kombu.Exchange(exchange, "topic", durable=True),
    )

    def publish(batch: Sequence[OutboundMessage]) -> None:
        for message in batch:
            producer.publish(
                message.payload.encode(), routing_key=message.topic,
                content_type="application/json", content_encoding="utf-8",
                headers=broker_headers(message), delivery_mode=2,
                message_id=message.message_id, mandatory=True,
            )

    return publish, connection.release


def measure(publish: PublishBatch, batch_size: int, batches: int) -> list[float]:
    publish(make_batch(batch_size))  # connect and warm up outside the timing
    timings = []
    for _ in range(batches):
        batch = make_batch(batch_size)
        started = time.perf_counter()
        publish(batch)
        timings.append(time.perf_counter() - started)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20, help="timed batches (default 20)")
    parser.add_argument("--batch-size", type=int, default=500, help="messages (default 500)")
    args = parser.parse_args()

    cases: list[tuple[str, str, Callable[[str, str], tuple[PublishBatch, Callable[[], None]]]]]
    cases = [
        ("RabbitMQ", "KombuPublisher, pipelined confirms", kombu_publisher),
        ("RabbitMQ", "naive: confirm each message", naive_confirm_each),
        ("Redis", "KombuPublisher, one pipeline a batch", kombu_publisher),
        ("Redis", "kombu Producer per message (before)", kombu_producer_each),
    ]
    urls = {"RabbitMQ": AMQP_URL, "Redis": REDIS_URL}
    print(f"{args.batches} batches of {args.batch_size} messages (~200-byte payloads)\n")
    print(f"{'broker':<9} {'publisher':<36} {'msgs/s':>9} {'ms/batch p50':>13} {'p95':>8}")
    rates: dict[str, float] = {}
    for broker, label, factory in cases:
        exchange = f"eventferry-bench-{uuid.uuid4().hex[:8]}"
        try:
            queue = TemporaryQueue(urls[broker], exchange)
        except Exception as exc:  # Redis is optional here
            print(f"{broker:<9} {label:<36} skipped: {exc!r}")
            continue
        publish, close = factory(urls[broker], exchange)
        try:
            timings = measure(publish, args.batch_size, args.batches)
        except BrokerUnavailable as exc:
            print(f"{broker:<9} {label:<36} failed: {exc}")
            continue
        finally:
            close()
            queue.delete()
        rate = rates[label] = args.batch_size * len(timings) / sum(timings)
        p50 = statistics.median(timings) * 1000
        p95 = statistics.quantiles(timings, n=20)[-1] * 1000
        print(f"{broker:<9} {label:<36} {rate:>9,.0f} {p50:>13.1f} {p95:>8.1f}")
    rabbitmq = rates.get(cases[0][1])
    for broker, label, _ in cases:
        if broker == "Redis" and rabbitmq and label in rates:
            print(f"\nRedis, {label}: {rates[label] / rabbitmq:.0%} of RabbitMQ's "
                  "pipelined confirms", end="")
    print()


if __name__ == "__main__":
    main()
