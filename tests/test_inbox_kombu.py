"""InboxCallback on RabbitMQ: the message id comes from the AMQP ``message_id`` property;
two consumer processes that get the same message at once ship it once; failures reject
or requeue as documented."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from kombu import Connection

from eventferry_django.inbox.kombu import Delivery, InboxCallback
from eventferry_django.models import InboxMessage

from .amqp import AMQP_URL, require_broker, unique_name
from .engine_gaps import babelfish_gap
from .inbox_processes import ConsumerProcesses, running
from .testapp.models import Shipment

pytestmark = pytest.mark.django_db(transaction=True)

CONSUMER = [sys.executable, "-m", "tests.inbox_consumer"]


@pytest.fixture(scope="module")
def consumers(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[ConsumerProcesses]:
    with running(tmp_path_factory.mktemp("kombu-consumers"), CONSUMER) as consumers:
        yield consumers


@babelfish_gap("locking-hints-ignored", "UPDLOCK, HOLDLOCK on the inbox probe do not serialise: the second consumer fails on the unique key instead of skipping")
@pytest.mark.slow
def test_two_consumers_get_the_same_message_at_once_and_ship_once(
    consumers: ConsumerProcesses,
) -> None:
    message_id = str(uuid.uuid4())
    with Connection(AMQP_URL) as broker:
        producer = broker.Producer(serializer="json")
        for _ in range(2):
            producer.publish({"reference": "SO-1", "linger": 1.0}, routing_key=consumers.queue,
                             message_id=message_id)

    consumers.assert_shipped_once(message_id, "SO-1")
    # Both deliveries were acked: nothing is left in the queue.
    with Connection(AMQP_URL) as broker:
        _, waiting, _ = broker.default_channel.queue_declare(consumers.queue, passive=True)
    assert waiting == 0


# -- one consumer, in this process -----------------------------------------------------------

class Queue:
    """A queue of this test's own, read one message at a time."""

    def __init__(self, broker: Connection) -> None:
        self.simple = broker.SimpleQueue(unique_name("eventferry-inbox-kombu"),
                                         queue_opts={"durable": False})

    def put(self, body: dict[str, Any], **properties: Any) -> None:
        self.simple.put(body, serializer="json", **properties)

    def deliver(self, callback: InboxCallback) -> Delivery:
        message = self.simple.get(block=True, timeout=5)
        return callback(message.decode(), message)

    def waiting(self) -> int:
        return int(self.simple.qsize())


@pytest.fixture
def queue() -> Iterator[Queue]:
    require_broker()
    with Connection(AMQP_URL) as broker:
        own = Queue(broker)
        try:
            yield own
        finally:
            own.simple.close()
            own.simple.queue.bind(broker.channel()).delete()


def ship(body: dict[str, Any], message: Any) -> None:
    Shipment.objects.create(order_reference=body["reference"])
    if body.get("fail"):
        raise RuntimeError("cannot ship")


def test_the_message_id_property_deduplicates(queue: Queue) -> None:
    callback = InboxCallback("shipping", ship)
    for _ in range(2):
        queue.put({"reference": "SO-1"}, message_id="m-1")
    queue.put({"reference": "SO-2"}, message_id="m-2")
    assert [queue.deliver(callback) for _ in range(3)] == [
        Delivery.HANDLED, Delivery.DUPLICATE, Delivery.HANDLED]
    assert sorted(Shipment.objects.values_list("order_reference", flat=True)) == ["SO-1", "SO-2"]
    assert queue.waiting() == 0


def test_a_message_without_an_id_is_rejected_unhandled(queue: Queue) -> None:
    queue.put({"reference": "SO-1"})
    assert queue.deliver(InboxCallback("shipping", ship)) is Delivery.REJECTED
    assert not Shipment.objects.exists() and not InboxMessage.objects.exists()
    assert queue.waiting() == 0


@pytest.mark.parametrize("requeue_on_error", [False, True])
def test_a_failing_handler_rolls_back_and_rejects(queue: Queue, requeue_on_error: bool) -> None:
    callback = InboxCallback("shipping", ship, requeue_on_error=requeue_on_error)
    queue.put({"reference": "SO-1", "fail": True}, message_id="m-1")
    expected = Delivery.REQUEUED if requeue_on_error else Delivery.REJECTED
    assert queue.deliver(callback) is expected
    assert not Shipment.objects.exists() and not InboxMessage.objects.exists()
    if requeue_on_error:
        redelivered = queue.simple.get(block=True, timeout=5)
        assert redelivered.properties["message_id"] == "m-1"
        assert redelivered.delivery_info["redelivered"]
        redelivered.ack()
    assert queue.waiting() == 0


@pytest.mark.skipif("connection.vendor not in {'postgresql', 'mysql'}")
def test_a_lock_timeout_requeues_the_message(
    queue: Queue, second_connection: BaseDatabaseWrapper
) -> None:
    # A real lock conflict: another connection holds the row the handler must change.
    blocked = Shipment.objects.create(order_reference="held")
    timeout = {"postgresql": "SET LOCAL lock_timeout = '200ms'",
               "mysql": "SET SESSION innodb_lock_wait_timeout = 1"}[connection.vendor]

    def update_held(body: dict[str, Any], message: Any) -> None:
        with connection.cursor() as cursor:
            cursor.execute(timeout)
        Shipment.objects.filter(pk=blocked.pk).update(order_reference="changed")

    second_connection.set_autocommit(False)
    with second_connection.cursor() as cursor:
        table = second_connection.ops.quote_name(Shipment._meta.db_table)
        cursor.execute(f"SELECT id FROM {table} WHERE id = %s FOR UPDATE", [blocked.pk])
    try:
        queue.put({"reference": "SO-1"}, message_id="m-1")
        assert queue.deliver(InboxCallback("shipping", update_held)) is Delivery.REQUEUED
    finally:
        second_connection.rollback()
        second_connection.set_autocommit(True)
    assert not InboxMessage.objects.exists()
    # Once the lock is gone, the redelivery goes through.
    redelivered = queue.simple.get(block=True, timeout=5)
    assert InboxCallback("shipping", update_held)(redelivered.decode(), redelivered) is (
        Delivery.HANDLED)
    assert Shipment.objects.get(pk=blocked.pk).order_reference == "changed"
