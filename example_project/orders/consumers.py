"""The consumer of order events: idempotent by message id.

The outbox relay delivers *at least once*: a relay that dies after the broker took a
message but before it recorded so will publish that message again. So messages go
through eventferry's inbox (``InboxCallback``): handling one records its message id in
the inbox table in the same transaction as the side effects, and a redelivered message
is skipped and acked.

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
from django.db.models import F
from eventferry_django.inbox.kombu import Delivery, InboxCallback
from kombu import Consumer, Exchange, Queue, binding

from .models import CustomerTally, Shipment

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


@dataclass
class ConsumerStats:
    """What this process handled; the demo prints it."""

    handled: int = 0
    duplicates: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, outcome: Delivery) -> None:
        with self.lock:
            if outcome is Delivery.HANDLED:
                self.handled += 1
            elif outcome is Delivery.DUPLICATE:
                self.duplicates += 1


stats = ConsumerStats()


def handle_event(body: dict[str, Any], message: Any) -> None:
    HANDLERS[message.delivery_info["routing_key"]](body)


#: The inbox's consumer name: each consumer handles a message once, on its own.
handle_once = InboxCallback("shop.orders", handle_event)


def on_message(body: Any, message: Any) -> None:
    """kombu callback: handle once (acked after the commit), or skip a redelivery."""
    topic = message.delivery_info.get("routing_key")
    if topic not in HANDLERS or not isinstance(body, dict):
        logger.error("rejecting message %r (topic %r): not an order event",
                     message.properties.get("message_id"), topic)
        message.reject()
        return
    outcome = handle_once(body, message)
    stats.count(outcome)
    logger.info("%s %s %s", outcome.value, topic, message.properties.get("message_id"))


class OrderEventsConsumerStep(bootsteps.ConsumerStep):
    """Consumes ``shop.orders`` in every Celery worker of the shop's app."""

    def get_consumers(self, channel: Any) -> list[Consumer]:
        return [Consumer(channel, queues=[QUEUE], callbacks=[on_message],
                         accept=["json"], prefetch_count=50)]
