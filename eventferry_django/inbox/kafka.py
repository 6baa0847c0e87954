"""The records a confluent-kafka consumer polls, handled once each; their offsets
committed after the inbox transaction. Import needs nothing; a consumer needs
confluent-kafka (``pip install "eventferry-django[kafka]"``).

For consumers that read the relay's records off Kafka: the message id is the record's
``message_id`` header, which the relay sets to the outbox message id::

    from confluent_kafka import Consumer
    from eventferry_django.inbox.kafka import InboxHandler

    def on_order_event(event, record):
        Shipment.objects.create(order_id=event["order_id"])

    consumer = Consumer({"bootstrap.servers": "kafka:9092", "group.id": "shipping",
                         "enable.auto.commit": False})
    consumer.subscribe(["order.created"])
    handle = InboxHandler("shipping", on_order_event, consumer)
    while True:
        record = consumer.poll(1.0)
        if record is not None and record.error() is None:
            handle(record)

The handler gets the record's value decoded as JSON (the payload; in structured
CloudEvents mode the whole CloudEvent) and the record. It runs inside
``transaction.atomic(using=...)`` after the inbox row is inserted; the record's offset
is committed (``commit(message=record, asynchronous=False)``) once that transaction has
committed, or at once when the record was handled before. So a consumer that dies
between the two, or a rebalance that hands the partition to another consumer while the
record is being handled, makes Kafka deliver the record again, and the inbox skips it.
Turn ``enable.auto.commit`` off: auto-commit would commit offsets of records not yet
handled.

A CloudEvent (from the relay with ``EVENTFERRY["MESSAGE_FORMAT"]`` set to a CloudEvents
format, or from any other producer) is deduplicated on its own ``id``: the ``ce_id``
header in binary mode, the document's ``id`` in structured mode (``content-type``
header ``application/cloudevents+json``).

A handler that raises rolls everything back. On a deadlock or lock timeout (or on any
error, with ``requeue_on_error``) the consumer is rewound to the record (``seek``), so
its next ``poll()`` returns it again; otherwise, as for a record without a usable id or
whose value is not JSON, the error is logged and the offset committed: the record is
skipped. Kafka has no dead-letter queue of its own; produce such records to one in the
handler if they must not be skipped.
"""

from __future__ import annotations

import importlib
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..exceptions import InvalidMessage
from ..publishers.message_format import KAFKA_BINDING, cloudevent_id
from . import check_key
from .delivery import BrokerCallback, Delivery

logger = logging.getLogger(__name__)

__all__ = ["Delivery", "InboxHandler"]


class InboxHandler(BrokerCallback):
    """Runs ``handler(value, record)`` at most once per message id for ``consumer``, for
    the records ``kafka_consumer`` (a ``confluent_kafka.Consumer``) polls, and commits
    each record's offset after. Calling it returns a
    :class:`~eventferry_django.inbox.delivery.Delivery`."""

    def __init__(
        self,
        consumer: str,
        handler: Callable[[Any, Any], object],
        kafka_consumer: Any,
        *,
        using: str | None = None,
        requeue_on_error: bool = False,
    ) -> None:
        super().__init__(consumer, handler, using=using, requeue_on_error=requeue_on_error)
        self.kafka_consumer = kafka_consumer

    def __call__(self, record: Any) -> Delivery:
        if record.error() is not None:
            raise ValueError(f"{self.consumer} was handed an error, not a record: "
                             f"{record.error()}; pass only records whose error() is None")
        headers = record_headers(record)
        try:
            message_id = self.message_id(record, headers)
            value = json.loads(record.value()) if record.value() is not None else None
        except (InvalidMessage, ValueError) as exc:
            logger.error("%s skipped the record at %s[%s]@%s: %s", self.consumer,
                         record.topic(), record.partition(), record.offset(), exc)
            self._commit(record)
            return Delivery.REJECTED
        delivery = self.deliver(message_id, value, record, logger)
        if delivery is Delivery.REQUEUED:
            self._rewind(record)
        else:
            self._commit(record)
        return delivery

    @staticmethod
    def message_id(record: Any, headers: Mapping[str, str]) -> str:
        """The record's id: the CloudEvent's, or the ``message_id`` header."""
        found = (cloudevent_id(record.value(), headers.get("content-type"), headers,
                               KAFKA_BINDING)
                 or headers.get("message_id"))
        return check_key(found, "message_id")

    def _commit(self, record: Any) -> None:
        """Commit past ``record``. A commit that fails (the partition went to another
        consumer in a rebalance) is only logged: the record comes back to that consumer,
        whose inbox skips it if it was handled here."""
        try:
            self.kafka_consumer.commit(message=record, asynchronous=False)
        except _kafka_exception() as exc:
            logger.warning("%s could not commit %s[%s]@%s: %s", self.consumer,
                           record.topic(), record.partition(), record.offset(), exc)

    def _rewind(self, record: Any) -> None:
        """Have the next ``poll()`` return ``record`` again."""
        partition = importlib.import_module("confluent_kafka").TopicPartition(
            record.topic(), record.partition(), record.offset())
        self.kafka_consumer.seek(partition)


def record_headers(record: Any) -> dict[str, str]:
    """A record's headers as text (the last of a repeated name wins; a null value is
    left out)."""
    return {name: value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            for name, value in (record.headers() or []) if value is not None}


def _kafka_exception() -> type[Exception]:
    exception: type[Exception] = importlib.import_module("confluent_kafka").KafkaException
    return exception
