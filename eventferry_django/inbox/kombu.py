"""A kombu consumer callback that handles each message once. Import needs kombu.

For consumers that read the relay's messages straight off RabbitMQ (or Redis): the
message id is the AMQP ``message_id`` property, which the relay sets to the outbox
message id::

    from kombu import Consumer
    from eventferry_django.inbox.kombu import InboxCallback

    def on_order_event(body, message):
        Shipment.objects.create(order_id=body["order_id"])

    Consumer(channel, queues=[queue], accept=["json"],
             callbacks=[InboxCallback("shipping", on_order_event)])

A CloudEvent (from the relay with ``EVENTFERRY["MESSAGE_FORMAT"]`` set to a CloudEvents
format, or from any other CloudEvents producer) is deduplicated on its own ``id``: the
``cloudEvents_id`` (or ``cloudEvents:id``) header in binary mode, the document's ``id``
in structured mode, whose content type ``application/cloudevents+json`` the consumer
must accept (``accept=["json", "application/cloudevents+json"]``; an ``InboxCallback``
teaches kombu to decode it).

The handler runs inside ``transaction.atomic(using=...)`` after the inbox row is
inserted. The message is acked once that transaction has committed, or at once when it
was handled before. A handler that raises rolls everything back and the message is
rejected (requeued if the error was a deadlock or lock timeout, which a second try may
not meet; otherwise dead-lettered by the queue's ``x-dead-letter-exchange``, if any, or
requeued when ``requeue_on_error`` is set).
"""

from __future__ import annotations

import importlib
import json
import logging
from typing import Any

from ..exceptions import InvalidMessage
from ..publishers.message_format import CLOUDEVENTS_JSON, cloudevent_id
from . import check_key
from .delivery import BrokerCallback, Delivery

__all__ = ["Delivery", "InboxCallback"]

logger = logging.getLogger(__name__)


class InboxCallback(BrokerCallback):
    """A kombu callback ``(body, message)`` that runs ``handler(body, message)`` at most
    once per message id for ``consumer``. Calling it returns a :class:`Delivery`. Made
    as ``InboxCallback(consumer, handler, *, using=None, requeue_on_error=False)``."""

    def prepare(self) -> None:
        """kombu decodes a body before calling back: teach it CloudEvents' JSON first."""
        _decode_structured_cloudevents()

    def __call__(self, body: Any, message: Any) -> Delivery:
        try:
            message_id = (cloudevent_id(body, message.content_type, message.headers)
                          or message.properties.get("message_id"))
            check_key(message_id, "message_id")
        except InvalidMessage as exc:
            logger.error("%s rejected a message without a usable message_id property "
                         "(routing key %r): %s", self.consumer,
                         message.delivery_info.get("routing_key"), exc)
            message.reject(requeue=False)
            return Delivery.REJECTED
        delivery = self.deliver(message_id, body, message, logger)
        if delivery in (Delivery.REQUEUED, Delivery.REJECTED):
            message.reject(requeue=delivery is Delivery.REQUEUED)
        else:
            message.ack()
        return delivery


def _decode_structured_cloudevents() -> None:
    """Let kombu decode ``application/cloudevents+json`` bodies as JSON (a consumer still
    decides whether to accept them); registering again replaces the same entry."""
    serialization: Any = importlib.import_module("kombu.serialization")  # untyped
    serialization.register("cloudevents-json", json.dumps, json.loads,
                           content_type=CLOUDEVENTS_JSON, content_encoding="utf-8")
