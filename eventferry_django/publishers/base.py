"""The interface between the relay and a broker.

A publisher receives a batch of messages and answers, per message, whether it was
delivered (``OK``), failed in a way worth retrying (``RETRY``, spends an attempt) or
can never be delivered (``GIVE_UP``, the row goes dead). A broker that cannot be reached
is not the message's fault: the publisher raises :class:`BrokerUnavailable` and the
relay hands the whole batch back without spending any attempts.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.checks import CheckMessage, Error

from ..exceptions import EventferryError

#: The password of a URL's user (``scheme://user:password@host``); kombu separates
#: failover URLs with ``;``.
_URL_PASSWORD = re.compile(r"(?<=://)([^:/@;]*):[^/;]*@")


def mask_url(url: str) -> str:
    """``url`` with its password, if any, replaced by ``****``: for logs and messages."""
    return _URL_PASSWORD.sub(r"\1:****@", url)


#: Headers every message of the plain format carries, filled from the outbox row
#: (``traceparent`` and ``schema_version`` only when the row has them). They override an
#: event's own header of the same name, so consumers can trust them.
RESERVED_HEADERS = ("aggregate_type", "aggregate_id", "partition_key", "traceparent", "attempt",
                    "schema_version")


class BrokerUnavailable(EventferryError):
    """The broker could not be reached; nothing in the batch is to blame."""


class Outcome(enum.Enum):
    OK = "ok"
    RETRY = "retry"
    GIVE_UP = "give_up"


@dataclass(frozen=True)
class OutboundMessage:
    """One claimed outbox row, as a publisher sees it."""

    id: int
    message_id: str
    topic: str
    aggregate_type: str
    aggregate_id: str
    partition_key: str | None
    payload: str  # JSON text, published as-is
    headers: Mapping[str, Any] = field(default_factory=dict)
    trace_id: str | None = None
    attempts: int = 0
    #: When the event was written (the database's clock, UTC); None only for messages
    #: built by hand.
    created_at: dt.datetime | None = None
    #: The version of the payload's schema the event was written with, if given.
    schema_version: str | None = None

    @property
    def effective_partition_key(self) -> str:
        return self.partition_key if self.partition_key is not None else self.aggregate_id


#: The JSON spellings the publishers send, made once: ``json.dumps`` with any option
#: builds an encoder per call, which on Kafka cost 3.5 us a message for its ``attempt``
#: header alone.
_JSON = json.JSONEncoder(ensure_ascii=False)
_COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def json_text(value: Any, *, compact: bool = False) -> str:
    """``value`` as JSON text, non-ASCII kept (``compact``: without spaces), as
    ``json.dumps`` writes it; an int, such as every message's ``attempt`` header, without
    an encoder."""
    if type(value) is int:
        return str(value)
    return (_COMPACT_JSON if compact else _JSON).encode(value)


def broker_headers(message: OutboundMessage) -> dict[str, Any]:
    """The headers to publish with ``message``: the event's own, then the reserved ones.

    Reserved names win over event headers of the same name. ``traceparent`` and
    ``schema_version`` are reserved only when the row has them; without, an event's own
    header of that name passes.
    Every publisher that carries headers starts from these (Celery's drops the names its
    task protocol owns).
    """
    reserved: dict[str, Any] = {
        "aggregate_type": message.aggregate_type,
        "aggregate_id": message.aggregate_id,
        "partition_key": message.effective_partition_key,
        "attempt": message.attempts + 1,
    }
    if message.trace_id is not None:
        reserved["traceparent"] = message.trace_id
    if message.schema_version is not None:
        reserved["schema_version"] = message.schema_version
    return {**message.headers, **reserved}


@dataclass(frozen=True)
class PublishResult:
    outcome: Outcome
    error: str | None = None

    @classmethod
    def ok(cls) -> PublishResult:
        return cls(Outcome.OK)


class Publisher:
    """Base class of publishers named in ``EVENTFERRY["PUBLISHER"]["BACKEND"]``.

    ``OPTIONS`` arrive as keyword arguments. Subclasses validate them in :meth:`check`
    (run by ``manage.py check`` without connecting anywhere) and implement :meth:`publish`.
    """

    def __init__(self, **options: Any) -> None:
        self.options = options

    @classmethod
    def check(cls, options: Mapping[str, Any]) -> list[CheckMessage]:
        """Problems with ``options``, as Django check messages; none by default."""
        return []

    @classmethod
    def missing_dependency(cls, installed: bool, package: str, extra: str, check_id: str
                           ) -> list[CheckMessage]:
        """An Error saying this publisher's library is not installed, if it is not."""
        if installed:
            return []
        return [Error(
            f"{cls.__name__} needs {package}, which is not installed.",
            hint=f'pip install "eventferry-django[{extra}]"',
            id=check_id,
        )]

    @classmethod
    def unknown_options(
        cls, options: Mapping[str, Any], known: Iterable[str], check_id: str
    ) -> list[CheckMessage]:
        """An Error naming the OPTIONS this publisher does not take, if any; for
        :meth:`check`."""
        known = sorted(known)
        unknown = sorted(set(options) - set(known))
        if not unknown:
            return []
        return [Error(
            f"{cls.__name__} got unknown OPTIONS {unknown}.",
            hint=f"{cls.__name__} accepts: {', '.join(known)}.",
            id=check_id,
        )]

    def describe(self) -> str:
        """Where this publisher sends messages, for the relay's start-up log line; never
        a password (see :func:`mask_url`)."""
        return type(self).__name__

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        """Deliver ``messages``; return one result per message, in the same order.

        ``messages`` are in id order, and a chain (several rows of one aggregate) always
        arrives whole in one call. Send them in the order given, on one connection or
        channel, and say in the class docstring what order the broker then preserves:
        that is the ordering promise the relay can make to consumers.
        """
        raise NotImplementedError

    def close(self) -> None:
        """Release connections; the relay calls this when it stops."""
