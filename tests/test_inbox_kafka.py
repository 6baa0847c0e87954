"""InboxHandler on Kafka (Tansu, started by the tests): the message id comes from the
record's ``message_id`` header, or the CloudEvent's id; two consumer processes that get
the same record at once ship it once; the offset is committed after the inbox
transaction, and a failure skips or rewinds as documented."""

from __future__ import annotations

import functools
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eventferry_django.inbox.delivery import Delivery
from eventferry_django.inbox.kafka import InboxHandler
from eventferry_django.models import InboxMessage
from eventferry_django.publishers.message_format import KAFKA_BINDING, MessageFormat

from .engine_gaps import babelfish_gap
from .inbox_processes import ConsumerProcesses, running
from .kafka_broker import TansuBroker, confluent_kafka, running_broker, unique_topic
from .test_publishers import message
from .testapp.models import Shipment

pytestmark = pytest.mark.django_db(transaction=True)

CONSUMER = [sys.executable, "-m", "tests.kafka_inbox_consumer"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    yield from running_broker(tmp_path_factory.mktemp("tansu"))


def produce(broker: TansuBroker, topic: str, value: str | bytes,
            headers: dict[str, str] | None = None, key: str = "SO-1") -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, value=value, key=key, headers=list((headers or {}).items()))
    assert producer.flush(10) == 0


def committed(broker: TansuBroker, topic: str, group: str) -> int:
    """The group's committed offset of partition 0 (negative: none)."""
    consumer = broker.consumer(group)
    try:
        [partition] = consumer.committed([confluent_kafka.TopicPartition(topic, 0)],
                                         timeout=10)
    finally:
        consumer.close()
    return int(partition.offset)


# -- two consumer processes, one record ------------------------------------------------


class KafkaConsumers(ConsumerProcesses):
    """The consumer processes of tests/kafka_inbox_consumer.py on a one-partition topic
    of their own, in one consumer group."""

    broker: TansuBroker

    def __init__(self, directory: Path, command: list[str], broker: TansuBroker) -> None:
        self.broker = broker
        self.group = unique_topic("shipping")
        super().__init__(directory, command)

    def prepare(self) -> str:
        return self.broker.create_topic(unique_topic("eventferry-inbox-test"))

    def broker_env(self) -> dict[str, str]:
        return {"EVENTFERRY_KAFKA_SERVERS": self.broker.bootstrap,
                "EVENTFERRY_TEST_GROUP": self.group}

    def delete_queue(self) -> None:
        """Nothing: the broker keeps nothing past the module."""


@pytest.fixture(scope="module")
def consumers(django_db_setup: None, broker: TansuBroker,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsumerProcesses]:
    with running(tmp_path_factory.mktemp("kafka-consumers"), CONSUMER,
                 functools.partial(KafkaConsumers, broker=broker)) as processes:
        yield processes


@babelfish_gap("locking-hints-ignored", "UPDLOCK, HOLDLOCK on the inbox probe do not serialise: the second consumer fails on the unique key instead of skipping")
@pytest.mark.slow
def test_two_consumers_get_the_same_record_at_once_and_ship_once(
    consumers: KafkaConsumers, broker: TansuBroker,
) -> None:
    message_id = str(uuid.uuid4())
    produce(broker, consumers.queue, json.dumps({"reference": "SO-1", "linger": 1.0}),
            {"message_id": message_id})

    consumers.assert_shipped_once(message_id, "SO-1")
    # Both committed past it, after their transactions.
    assert committed(broker, consumers.queue, consumers.group) == 1


# -- one consumer, in this process -----------------------------------------------------


class Partition:
    """A one-partition topic of this test's own, read by a consumer of a group of its own."""

    def __init__(self, broker: TansuBroker) -> None:
        self.broker = broker
        self.topic = broker.create_topic(unique_topic("eventferry-inbox-kafka"))
        self.group = unique_topic("shipping")
        self.consumer = broker.consumer(self.group)
        self.consumer.assign([confluent_kafka.TopicPartition(self.topic, 0)])

    def put(self, body: dict[str, Any] | str, headers: dict[str, str] | None = None) -> None:
        produce(self.broker, self.topic, body if isinstance(body, str) else json.dumps(body),
                headers)

    def next(self, timeout: float = 10) -> Any:
        record = self.consumer.poll(timeout)
        assert record is not None and record.error() is None, record
        return record

    def committed(self) -> int:
        return committed(self.broker, self.topic, self.group)


@pytest.fixture
def partition(broker: TansuBroker) -> Iterator[Partition]:
    own = Partition(broker)
    try:
        yield own
    finally:
        own.consumer.close()


def ship(body: dict[str, Any], record: Any) -> None:
    Shipment.objects.create(order_reference=body["reference"])
    if body.get("fail"):
        raise RuntimeError("cannot ship")


def test_the_message_id_header_deduplicates_and_offsets_are_committed(
    partition: Partition,
) -> None:
    handle = InboxHandler("shipping", ship, partition.consumer)
    for _ in range(2):
        partition.put({"reference": "SO-1"}, {"message_id": "m-1"})
    partition.put({"reference": "SO-2"}, {"message_id": "m-2"})
    assert [handle(partition.next()) for _ in range(3)] == [
        Delivery.HANDLED, Delivery.DUPLICATE, Delivery.HANDLED]
    assert sorted(Shipment.objects.values_list("order_reference", flat=True)) == ["SO-1", "SO-2"]
    assert partition.committed() == 3


@pytest.mark.parametrize("value", [json.dumps({"reference": "SO-1"}), "not json"])
def test_a_record_without_an_id_or_json_is_skipped_unhandled(
    partition: Partition, value: str,
) -> None:
    headers = {"message_id": "m-1"} if value == "not json" else None
    partition.put(value, headers)
    assert InboxHandler("shipping", ship, partition.consumer)(partition.next()) is (
        Delivery.REJECTED)
    assert not Shipment.objects.exists() and not InboxMessage.objects.exists()
    assert partition.committed() == 1


@pytest.mark.parametrize("requeue_on_error", [False, True])
def test_a_failing_handler_rolls_back_and_skips_or_rewinds(
    partition: Partition, requeue_on_error: bool,
) -> None:
    handle = InboxHandler("shipping", ship, partition.consumer,
                          requeue_on_error=requeue_on_error)
    partition.put({"reference": "SO-1", "fail": True}, {"message_id": "m-1"})
    partition.put({"reference": "SO-2"}, {"message_id": "m-2"})
    expected = Delivery.REQUEUED if requeue_on_error else Delivery.REJECTED
    assert handle(partition.next()) is expected
    assert not Shipment.objects.exists() and not InboxMessage.objects.exists()
    # Rewound, the failed record comes again; skipped, the next one does.
    following = partition.next()
    assert following.offset() == (0 if requeue_on_error else 1)
    assert partition.committed() == (-1001 if requeue_on_error else 1)  # OFFSET_INVALID: none


@pytest.mark.parametrize("mode", ["cloudevents-binary", "cloudevents-structured"])
def test_the_inbox_dedupes_a_cloudevent_on_its_id(partition: Partition, mode: str) -> None:
    """A CloudEvent from any producer: no message_id header, the id in the event."""
    envelope = MessageFormat(mode, "https://shop.example.com", KAFKA_BINDING).envelope(
        message(1, message_id="ce-77", payload='{"reference": "SO-1"}'))
    headers = {**envelope.headers, "content-type": envelope.content_type}
    for _ in range(2):  # a redelivery, as a rebalance may make one
        partition.put(envelope.body, headers)
    handled: list[Any] = []
    handle = InboxHandler("shipping", lambda body, _: handled.append(body), partition.consumer)
    assert [handle(partition.next()) for _ in range(2)] == [Delivery.HANDLED,
                                                             Delivery.DUPLICATE]
    assert list(InboxMessage.objects.values_list("message_id", flat=True)) == ["ce-77"]
    assert len(handled) == 1
