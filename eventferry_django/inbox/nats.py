"""A NATS JetStream consumer callback that handles each message once.

For consumers that read the relay's messages off a JetStream stream, pushed or pulled:
the message id is the ``Nats-Msg-Id`` header, which the relay sets to the outbox message
id (and by which the stream already dropped republished copies within its duplicate
window; the inbox catches the rest: redeliveries after an ack that did not arrive in
``ack_wait``, a republish outside the window)::

    import nats
    from eventferry_django.inbox.nats import InboxHandler

    def on_order_event(event, msg):   # an ordinary function, using the Django ORM
        Shipment.objects.create(order_id=event["order_id"])

    async def main():
        js = (await nats.connect("nats://127.0.0.1:4222")).jetstream()
        handler = InboxHandler("shipping", on_order_event)
        # pushed: acking is the handler's, so manual_ack
        await js.subscribe("orders.>", durable="shipping", cb=handler, manual_ack=True)
        # or pulled:
        subscription = await js.pull_subscribe("orders.>", durable="shipping")
        for msg in await subscription.fetch(10):
            await handler(msg)

nats-py calls back on its asyncio loop, while Django's ORM is synchronous: the handler
runs through asgiref's ``sync_to_async(thread_sensitive=True)``, on the one thread where
Django runs synchronous code for async callers, so its connections are reused and
closed as they are around a request. One message is handled at a time per process.

A CloudEvent is deduplicated on its own ``id``: the ``ce-id`` header in binary mode
(percent-decoded, as the NATS binding spells it), the document's ``id`` in structured
mode (``Content-Type: application/cloudevents+json``). The body is decoded as JSON and
handed to ``handler(body, msg)``; in structured mode that is the whole CloudEvent.

The handler runs inside ``transaction.atomic(using=...)`` after the inbox row is
inserted. The message is acked once that transaction has committed, or at once when it
was handled before. A handler that raises rolls everything back, and the message is
nak'ed (redelivered) after a deadlock or lock timeout, or with ``requeue_on_error``;
otherwise it is terminated (``term``: JetStream will not deliver it again, and publishes
a ``MSG_TERMINATED`` advisory a dead-letter consumer can follow). A message without a
usable id, or whose body is not JSON, is terminated unhandled.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from asgiref.sync import sync_to_async

from ..exceptions import InvalidMessage
from ..publishers.message_format import NATS_BINDING, cloudevent_id
from . import check_key
from .delivery import BrokerCallback, Delivery

__all__ = ["Delivery", "InboxHandler", "message_id_of"]

logger = logging.getLogger(__name__)

#: The JetStream header the relay sets to the outbox message id.
MESSAGE_ID_HEADER = "Nats-Msg-Id"


def message_id_of(msg: Any) -> str:
    """The inbox key of a JetStream message: its CloudEvents id, else ``Nats-Msg-Id``.
    Raises :class:`~eventferry_django.exceptions.InvalidMessage` when it has neither."""
    headers = msg.headers or {}
    try:
        message_id = (cloudevent_id(msg.data, headers.get("Content-Type"), headers,
                                    NATS_BINDING)
                      or headers.get(MESSAGE_ID_HEADER))
    except ValueError as exc:  # a ce-id that does not percent-decode to UTF-8
        raise InvalidMessage(f"message_id: unreadable ce-id header: {exc}") from exc
    return check_key(message_id, "message_id")


class InboxHandler(BrokerCallback):
    """An async nats-py callback ``(msg)`` that runs ``handler(body, msg)`` at most once
    per message id for ``consumer``, then acks, naks or terminates ``msg``. Awaiting it
    returns a :class:`~eventferry_django.inbox.delivery.Delivery`. The handler must not
    ack itself. Made as ``InboxHandler(consumer, handler, *, using=None,
    requeue_on_error=False)``."""

    async def __call__(self, msg: Any) -> Delivery:
        try:
            message_id = message_id_of(msg)
            body = json.loads(msg.data)
        except (InvalidMessage, ValueError) as exc:
            logger.error("%s terminated a message it cannot handle (subject %r): %s",
                         self.consumer, msg.subject, exc)
            await msg.term()
            return Delivery.REJECTED
        delivery: Delivery = await sync_to_async(self.handle, thread_sensitive=True)(
            message_id, body, msg)
        if delivery is Delivery.REQUEUED:
            await msg.nak()
        elif delivery is Delivery.REJECTED:
            await msg.term()
        else:
            await msg.ack()
        return delivery

    def handle(self, message_id: str, body: Any, msg: Any) -> Delivery:
        """The synchronous part, run on Django's thread: the inbox row and the handler in
        one transaction, and what ``msg`` is to be told."""
        return self.deliver(message_id, body, msg, logger)
