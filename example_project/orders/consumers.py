"""The consumer of order events: idempotent by message id.

The outbox relay delivers *at least once*: a relay that dies after the broker took a
message but before it recorded so will publish that message again. So handling a message
inserts its message id into ``ProcessedMessage`` (unique) in the same transaction as the
side effects; a redelivered message hits the unique key, is skipped and acked.

It runs inside a Celery worker as a bootstep (see ``shop/celery.py``), reading the
``shop.orders`` queue on the worker's broker connection::

    celery -A shop worker --loglevel INFO

The messages are the outbox's own (published by ``KombuPublisher``): the body is the
event's JSON payload, the AMQP ``message_id`` the outbox message id, the routing key the
topic. ``demo.py`` runs the same worker in a thread on kombu's in-process transport.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from celery import bootsteps
from django.db import IntegrityError, close_old_connections, transaction
from django.db.models import F
from kombu import Consumer, Exchange, Queue, binding

from .models import CustomerTally, ProcessedMessage, Shipment

logger = logging.getLogger("orders.consumers")

#: The exchange the shop's KombuPublisher publishes to (EVENTFERRY OPTIONS "exchange"),
#: declared alike: a durable topic exchange.
EXCHANGE = Exchange("shop", type="topic", durable=True)


def on_order_created(event: dict[str, Any]) -> None:
    updated = CustomerTally.objects.filter(customer=event["customer"]).update(
        orders=F("orders") + 1)
    if not updated:
        CustomerTally.objects.create(customer=event["customer"], orders=1)


def on_order_paid(event: dict[str, Any]) -> None:
    CustomerTally.objects.filter(customer=event["customer"]).update(
        spent=F("spent") + Decimal(event["total"]))
    Shipment.objects.create(order_id=event["order_id"], order_reference=event["reference"],
                            customer=event["customer"])


HANDLERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "order.created": on_order_created,
    "order.paid": on_order_paid,
}

#: One durable queue, bound to exactly the topics handled here. Any other topic published
#: to the exchange reaches no queue: the relay sees it as unroutable and retries it.
QUEUE = Queue("shop.orders", durable=True,
              bindings=[binding(EXCHANGE, routing_key=topic) for topic in HANDLERS])

HANDLED, DUPLICATE = "handled", "duplicate"


@dataclass
class ConsumerStats:
    """What this process handled; the demo prints it."""

    handled: int = 0
    duplicates: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, outcome: str) -> None:
        with self.lock:
            if outcome == HANDLED:
                self.handled += 1
            else:
                self.duplicates += 1


stats = ConsumerStats()


def handle_event(message_id: str, topic: str, event: dict[str, Any]) -> str:
    """Apply ``event`` once: returns ``HANDLED``, or ``DUPLICATE`` for a message id that
    was handled before (nothing is changed then)."""
    handler = HANDLERS[topic]
    with transaction.atomic():
        # The ledger row first: a duplicate fails here before any side effect, and on
        # SQLite the transaction takes its write lock with its first statement.
        try:
            with transaction.atomic():
                ProcessedMessage.objects.create(message_id=message_id, topic=topic)
        except IntegrityError:
            return DUPLICATE
        handler(event)
    return HANDLED


def on_message(body: Any, message: Any) -> None:
    """kombu callback: handle, then ack once the transaction has committed."""
    message_id = message.properties.get("message_id")
    topic = message.delivery_info.get("routing_key")
    if not message_id or topic not in HANDLERS or not isinstance(body, dict):
        logger.error("rejecting message %r (topic %r): not an order event", message_id, topic)
        message.reject()
        return
    close_old_connections()
    try:
        outcome = handle_event(message_id, topic, body)
    except Exception:
        # Not acked, not requeued in a hot loop: on RabbitMQ give the queue a dead-letter
        # exchange (x-dead-letter-exchange) to keep such messages for inspection.
        logger.exception("failed to handle %s %s", topic, message_id)
        message.reject()
        return
    finally:
        close_old_connections()
    stats.count(outcome)
    if outcome == DUPLICATE:
        logger.info("skipped %s %s: handled before (redelivery)", topic, message_id)
    else:
        logger.info("handled %s %s", topic, message_id)
    message.ack()


class OrderEventsConsumerStep(bootsteps.ConsumerStep):
    """Consumes ``shop.orders`` in every Celery worker of the shop's app."""

    def get_consumers(self, channel: Any) -> list[Consumer]:
        return [Consumer(channel, queues=[QUEUE], callbacks=[on_message],
                         accept=["json"], prefetch_count=50)]
