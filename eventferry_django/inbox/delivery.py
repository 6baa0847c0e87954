"""One delivery to a broker consumer's inbox callback: what became of it, and the one
way every such callback (kombu's, NATS JetStream's) runs its handler, so that they
settle a failure alike and differ only in where they read the message id and how they
ack, requeue or reject."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections

from ..conf import get_settings
from ..store.inbox import InboxStore
from . import DUPLICATE, check_key, run_once


class Delivery(enum.Enum):
    """What became of one delivery."""

    HANDLED = "handled"
    DUPLICATE = "duplicate"
    #: Failed, or had no usable message id: rejected without requeueing.
    REJECTED = "rejected"
    #: Failed on a deadlock or lock timeout (or on anything, with ``requeue_on_error``):
    #: back in the queue for another try.
    REQUEUED = "requeued"


class BrokerCallback:
    """What a broker consumer's inbox callback is made of: the consumer's name, the
    handler ``(body, message)``, the inbox's database and whether a failed message is
    requeued. Subclasses read the message id and settle the message by the
    :class:`Delivery` that :meth:`deliver` returns."""

    def __init__(
        self,
        consumer: str,
        handler: Callable[[Any, Any], object],
        *,
        using: str | None = None,
        requeue_on_error: bool = False,
    ) -> None:
        self.consumer = check_key(consumer, "consumer")
        self.handler = handler
        self.using = using
        self.requeue_on_error = requeue_on_error
        self.prepare()

    def prepare(self) -> None:
        """Whatever the broker's client needs before the first message arrives."""

    def deliver(self, message_id: str, body: Any, message: Any, log: logging.Logger
                ) -> Delivery:
        """Run ``handler(body, message)`` at most once per ``message_id`` (in
        :func:`~eventferry_django.inbox.run_once`'s transaction) and say what the broker
        is to be told: ack (handled, duplicate), requeue or reject. A failure is logged
        on ``log`` and requeued when it was a deadlock or lock timeout, which a second
        try may not meet, or with ``requeue_on_error``."""
        # A consumer runs for days: connections the database closed meanwhile, or that
        # outlived CONN_MAX_AGE, are replaced before and after each message, as Django
        # does around each request.
        close_old_connections()
        try:
            result = run_once(self.consumer, message_id, lambda: self.handler(body, message),
                              using=self.using)
        except Exception as exc:
            transient = InboxStore(self.using or get_settings().database).is_transient(exc)
            log.exception("%s failed to handle message %s", self.consumer, message_id)
            requeue = transient or self.requeue_on_error
            return Delivery.REQUEUED if requeue else Delivery.REJECTED
        finally:
            close_old_connections()
        return Delivery.DUPLICATE if result is DUPLICATE else Delivery.HANDLED
