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

import enum
import importlib
import json
import logging
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections

from ..conf import get_settings
from ..exceptions import InvalidMessage
from ..publishers.message_format import CLOUDEVENTS_JSON, cloudevent_id
from ..store.inbox import InboxStore
from . import DUPLICATE, check_key, run_once

logger = logging.getLogger(__name__)


class Delivery(enum.Enum):
    """What became of one delivery."""

    HANDLED = "handled"
    DUPLICATE = "duplicate"
    #: Failed, or had no usable message id: rejected without requeueing.
    REJECTED = "rejected"
    #: Failed on a deadlock or lock timeout (or on anything, with ``requeue_on_error``):
    #: back in the queue for another try.
    REQUEUED = "requeued"


class InboxCallback:
    """A kombu callback ``(body, message)`` that runs ``handler(body, message)`` at most
    once per message id for ``consumer``. Calling it returns a :class:`Delivery`."""

    def __init__(
        self,
        consumer: str,
        handler: Callable[[Any, Any], object],
        *,
        using: str | None = None,
        requeue_on_error: bool = False,
    ) -> None:
        self.consumer = check_key(consumer, "consumer")
        _decode_structured_cloudevents()
        self.handler = handler
        self.using = using
        self.requeue_on_error = requeue_on_error

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
        # A consumer runs for days: connections the database closed meanwhile, or that
        # outlived CONN_MAX_AGE, are replaced before and after each message, as Django
        # does around each request.
        close_old_connections()
        try:
            result = run_once(self.consumer, message_id,
                              lambda: self.handler(body, message), using=self.using)
        except Exception as exc:
            transient = InboxStore(self.using or get_settings().database).is_transient(exc)
            logger.exception("%s failed to handle message %s", self.consumer, message_id)
            requeue = transient or self.requeue_on_error
            message.reject(requeue=requeue)
            return Delivery.REQUEUED if requeue else Delivery.REJECTED
        finally:
            close_old_connections()
        message.ack()
        return Delivery.DUPLICATE if result is DUPLICATE else Delivery.HANDLED


def _decode_structured_cloudevents() -> None:
    """Let kombu decode ``application/cloudevents+json`` bodies as JSON (a consumer still
    decides whether to accept them); registering again replaces the same entry."""
    serialization: Any = importlib.import_module("kombu.serialization")  # untyped
    serialization.register("cloudevents-json", json.dumps, json.loads,
                           content_type=CLOUDEVENTS_JSON, content_encoding="utf-8")
