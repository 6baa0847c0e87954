"""The inbox: a consumer handles each message once, however often it is delivered.

The relay delivers at least once, so a consumer sees some messages twice. Handling a
message here first inserts a row keyed by (consumer name, message id) into the inbox
table, in the same transaction as the handler's own writes: both commit, or neither. A
message whose row exists is skipped. A second delivery that arrives while the first is
still being handled waits on that row's key: it is skipped if the first commits and
handled if the first rolls back, so a message's effects never happen twice.

Five ways in:

- :func:`handle_once`, a decorator for a plain function;
- :class:`eventferry_django.inbox.celery.InboxTask`, a Celery task base (the message id
  is the task id, which ``CeleryPublisher`` sets to the outbox message id);
- :class:`eventferry_django.inbox.kombu.InboxCallback`, a kombu consumer callback (the
  message id is the AMQP ``message_id`` property, which the relay sets);
- :class:`eventferry_django.inbox.nats.InboxHandler`, a NATS JetStream callback (the
  message id is the ``Nats-Msg-Id`` header);
- :class:`eventferry_django.inbox.kafka.InboxHandler`, for the records a confluent-kafka
  consumer polls (the message id is the ``message_id`` header); it commits each
  record's offset once the inbox transaction has committed.

:func:`record_message` is what all five call, for code that opens its own transaction.
The handler's writes must go to the inbox's database (``using``), or they are not in the
transaction that the inbox row commits in.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Final, ParamSpec, TypeVar

from django.db import transaction

from .. import metrics
from ..conf import get_settings
from ..exceptions import InvalidMessage
from ..store.inbox import InboxStore
from ..transactions import require_transaction

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

#: The inbox's column widths, counted in UTF-16 code units as NVARCHAR counts them.
_LIMITS = {"consumer": 255, "message_id": 64}


class Duplicate:
    """What a :func:`handle_once` function returns for a message it handled before."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "DUPLICATE"


#: Returned instead of the handler's result when the message was handled before.
DUPLICATE: Final = Duplicate()


def check_key(value: object, field: str) -> str:
    """``value`` if it can be stored as the inbox's ``field``, else :class:`InvalidMessage`."""
    limit = _LIMITS[field]
    if not isinstance(value, str) or not value.strip():
        raise InvalidMessage(f"{field}: must be a non-empty string, got {value!r}.")
    if "\x00" in value:
        raise InvalidMessage(f"{field}: contains a NUL character, which databases refuse.")
    try:
        encoded = value.encode("utf-16-le")
    except UnicodeEncodeError:
        raise InvalidMessage(f"{field}: contains a lone surrogate: {value!r}.") from None
    # NVARCHAR(n) counts UTF-16 code units: a character outside the BMP takes two.
    if len(encoded) > 2 * limit:
        raise InvalidMessage(f"{field}: is longer than {limit} characters ({len(value)} given).")
    return value


def record_message(consumer: str, message_id: str, *, using: str | None = None) -> bool:
    """Record that ``consumer`` handled ``message_id``, in the current transaction on
    ``using`` (default ``EVENTFERRY["DATABASE"]``). Returns True the first time and
    False when the message was handled before: skip it then.

    Call it first in the transaction, before the handler's writes, so that a concurrent
    delivery of the same message waits here instead of doing work that is thrown away.
    Raises :class:`~eventferry_django.exceptions.NotInTransaction` in autocommit mode and
    :class:`~eventferry_django.exceptions.InvalidMessage` for a missing or unstorable id.
    """
    check_key(consumer, "consumer")
    check_key(message_id, "message_id")
    alias = using or get_settings().database
    require_transaction(alias, "record_message()",
                        "the inbox row commits or rolls back with the handler's changes")
    first = InboxStore(alias).record(consumer, message_id)
    if first:
        transaction.on_commit(functools.partial(metrics.count_inbox_handled, consumer),
                              using=alias)
    else:
        metrics.count_inbox_duplicate(consumer)
        logger.info("%s skipped message %s: handled before", consumer, message_id)
    return first


def run_once(
    consumer: str, message_id: str, handler: Callable[[], T], *, using: str | None = None
) -> T | Duplicate:
    """Run ``handler()`` inside ``transaction.atomic(using=...)`` after recording the
    message; return its result, or :data:`DUPLICATE` without calling it when the message
    was handled before. An exception from the handler rolls the record back with the
    handler's writes, so a redelivery handles the message again."""
    alias = using or get_settings().database
    with transaction.atomic(using=alias):
        if record_message(consumer, message_id, using=alias):
            return handler()
    return DUPLICATE


def handle_once(
    consumer: str, *, using: str | None = None, message_id_arg: str = "message_id"
) -> Callable[[Callable[P, T]], Callable[P, T | Duplicate]]:
    """Decorate a handler so it runs at most once per message id for ``consumer``.

    The message id is the handler's argument named ``message_id_arg``. Each call runs in
    ``transaction.atomic(using=...)`` (``EVENTFERRY["DATABASE"]`` by default): the
    inbox row and the handler's writes commit together. A message handled before is not
    passed to the handler; the call returns :data:`DUPLICATE` instead::

        @handle_once("shipping")
        def on_order_paid(message_id: str, event: dict) -> None:
            Shipment.objects.create(order_id=event["order_id"])
    """
    check_key(consumer, "consumer")

    def decorate(handler: Callable[P, T]) -> Callable[P, T | Duplicate]:
        signature = inspect.signature(handler)
        if message_id_arg not in signature.parameters:
            raise TypeError(
                f"{handler.__qualname__}() has no parameter {message_id_arg!r} to read the "
                "message id from; add one, or name it with handle_once(message_id_arg=...)."
            )

        @functools.wraps(handler)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> T | Duplicate:
            bound = signature.bind(*args, **kwargs)
            message_id = check_key(bound.arguments.get(message_id_arg), "message_id")
            return run_once(consumer, message_id, lambda: handler(*args, **kwargs),
                            using=using)

        return wrapper

    return decorate


__all__ = ["DUPLICATE", "Duplicate", "check_key", "handle_once", "record_message", "run_once"]
