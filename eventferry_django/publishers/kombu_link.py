"""What both kombu publishers share: their settings, the shape of a message, the link.

:class:`KombuSettings` is the validated OPTIONS of
:class:`~eventferry_django.publishers.kombu.KombuPublisher`. :func:`routing_key_for` and
:func:`body_of` (of the row's :class:`~.message_format.Envelope`), or both at once with
:func:`prepare`, turn a row into what goes on the wire, or refuse it with
:class:`Unsendable`. :class:`KombuLink` owns one
kombu connection and channel: it opens them on first use, keeps them across batches, and
turns every way of losing them into
:class:`~eventferry_django.publishers.base.BrokerUnavailable`.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .base import BrokerUnavailable, OutboundMessage, mask_url
from .message_format import Envelope, MessageFormat

CONTENT_ENCODING = "utf-8"

#: AMQP ``shortstr`` fields (routing key, message id, exchange) hold at most 255 bytes.
SHORTSTR_MAX = 255

RoutingKey = Callable[[OutboundMessage], str]
T = TypeVar("T")


def kombu() -> Any:
    """The kombu module, imported on first use so this package imports without it.

    Typed as Any: kombu ships ``py.typed`` but leaves much unannotated, which strict mypy
    would reject call by call.
    """
    return importlib.import_module("kombu")


def transport_of(url: str) -> Any:
    """The kombu transport of ``url``; imports its client library, connects nowhere."""
    return kombu().Connection(url).transport


@dataclass(frozen=True)
class KombuSettings:
    """KombuPublisher's OPTIONS, validated and typed."""

    url: str
    exchange: str
    exchange_type: str
    routing_key: RoutingKey
    connect_timeout: float
    publish_timeout: float
    declare_exchange: bool
    max_message_bytes: int | None
    #: ``EVENTFERRY["MESSAGE_FORMAT"]``: what each row becomes on the wire.
    message_format: MessageFormat

    def describe(self) -> str:
        return f"{mask_url(self.url)} exchange {self.exchange!r} ({self.exchange_type})"


class Unsendable(Exception):
    """This message, and only this one, cannot be encoded or sent: it gets GIVE_UP."""


def body_of(settings: KombuSettings, envelope: Envelope) -> bytes:
    """The envelope's body (the payload, in plain and CloudEvents binary format) as UTF-8;
    refused when over ``max_message_bytes``."""
    try:
        body = envelope.body.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Unsendable(f"payload cannot be encoded as UTF-8: {exc}") from exc
    if settings.max_message_bytes is not None and len(body) > settings.max_message_bytes:
        raise Unsendable(
            f"payload is {len(body)} bytes, more than max_message_bytes "
            f"({settings.max_message_bytes}); not sent"
        )
    return body


def routing_key_for(settings: KombuSettings, message: OutboundMessage) -> str:
    """The message's routing key; a failing or over-long one is the message's fault."""
    try:
        key = settings.routing_key(message)
    except Exception as exc:  # a user's callable or format spec
        raise Unsendable(f"routing_key failed: {exc!r}") from exc
    if not isinstance(key, str):
        raise Unsendable(f"routing_key returned {key!r}, not a string")
    if len(key.encode("utf-8", "surrogatepass")) > SHORTSTR_MAX:
        raise Unsendable(f"routing key is longer than {SHORTSTR_MAX} bytes: {key[:60]!r}...")
    return key


@dataclass(frozen=True)
class Prepared:
    """One message ready for the wire: its routing key, envelope and encoded body."""

    routing_key: str
    envelope: Envelope
    body: bytes


def prepare(settings: KombuSettings, message: OutboundMessage) -> Prepared:
    """The message's routing key, envelope and body, or :class:`Unsendable`."""
    routing_key = routing_key_for(settings, message)
    envelope = settings.message_format.envelope(message)
    return Prepared(routing_key, envelope, body_of(settings, envelope))


def unroutable(settings: KombuSettings, routing_key: str) -> str:
    """The reason a virtual transport's message with no queue bound gets ``RETRY``."""
    return (f"unroutable: no queue bound to exchange {settings.exchange!r} with "
            f"routing key {routing_key!r}")


def exchange_of(settings: KombuSettings) -> Any:
    """The kombu Exchange (durable, never auto-deleted) the settings name."""
    return kombu().Exchange(
        settings.exchange, type=settings.exchange_type, durable=True, auto_delete=False,
    )


def described(exc: BaseException) -> str:
    """``repr(exc)``, or its class and text where the repr hides the text (redis-py 8
    spells a ConnectionError ``network:ConnectionError``)."""
    text = repr(exc)
    return text if str(exc) in text else f"{type(exc).__name__}({str(exc)!r})"


def timeout_errors() -> tuple[type[BaseException], ...]:
    """What a socket that did not answer in time raises: ``TimeoutError``, and redis-py's
    own ``TimeoutError`` (not a subclass of it) once redis-py is loaded."""
    redis_errors = sys.modules.get("redis.exceptions")
    return (TimeoutError,) if redis_errors is None else (TimeoutError, redis_errors.TimeoutError)


#: A publisher's own preparation of a fresh channel, ``(connection, channel)``: run inside
#: the link's connect, so its failures are "cannot connect" too.
OnOpen = Callable[[Any, Any], None]


class KombuLink:
    """One kombu connection and channel, opened on first use and dropped when broken.

    :meth:`run` serialises its callers with a lock (a connection must not be shared
    between threads), connects when needed, and maps a lost, silent or refusing broker to
    :class:`BrokerUnavailable` after dropping the connection; the next call reconnects.
    Anything else raised mid-batch drops the connection too, as half a batch may be on
    the wire.
    """

    def __init__(self, settings: KombuSettings, on_open: OnOpen) -> None:
        self.settings = settings
        self.on_open = on_open
        self._lock = threading.Lock()
        self._connection: Any = None  # kombu.Connection
        self._channel: Any = None

    def run(self, send: Callable[[Any, Any], T]) -> T:
        """``send(connection, channel)`` on the open link, under the lock."""
        with self._lock:
            if self._connection is None:
                self._connect()
            connection = self._connection
            errors = self._errors(connection)
            try:
                return send(connection, self._channel)
            except timeout_errors() as exc:  # socket.timeout is TimeoutError
                self._drop()
                raise BrokerUnavailable(
                    f"The broker at {connection.as_uri()} did not answer within "
                    f"{self.settings.publish_timeout}s: {described(exc)}"
                ) from exc
            except errors as exc:
                self._drop()
                raise BrokerUnavailable(
                    f"Lost the broker at {connection.as_uri()}: {described(exc)}"
                ) from exc
            except BaseException:
                # Half a batch may be on the wire: no later batch can trust this connection.
                self._drop()
                raise

    def _connect(self) -> None:
        settings = self.settings
        connection = kombu().Connection(
            settings.url,
            connect_timeout=settings.connect_timeout,
            transport_options=self._transport_options(),
        )
        uri = connection.as_uri()
        errors = self._errors(connection)
        try:
            # One attempt per host, no sleeping: the relay decides when to try again.
            connection.ensure_connection(
                max_retries=max(len(connection.alt), 1) - 1,
                reraise_as_library_errors=False,
            )
            channel = connection.channel()
            self.on_open(connection, channel)
            # The default exchange ("") and amq.* ones exist already and refuse declaring.
            virtual = connection.transport.driver_type != "amqp"
            declare = bool(settings.exchange) and (virtual or (
                settings.declare_exchange and not settings.exchange.startswith("amq.")
            ))
            if declare:
                exchange_of(settings)(channel).declare()
        except errors as exc:
            connection.collect()
            raise BrokerUnavailable(
                f"Cannot connect to the broker at {uri}: {described(exc)}") from exc
        self._connection, self._channel = connection, channel

    def _transport_options(self) -> dict[str, Any]:
        settings = self.settings
        driver_type = transport_of(settings.url).driver_type
        if driver_type == "amqp":
            # Socket-level bounds as a backstop for every blocking call, close() included.
            return {"read_timeout": settings.publish_timeout,
                    "write_timeout": settings.publish_timeout}
        if driver_type == "redis":
            return {
                "socket_timeout": settings.publish_timeout,
                "socket_connect_timeout": settings.connect_timeout,
            }
        return {}

    @staticmethod
    def _errors(connection: Any) -> tuple[type[BaseException], ...]:
        """Exceptions that mean the connection (not one message) is at fault."""
        return (
            *connection.connection_errors, *connection.channel_errors, OSError,
            importlib.import_module("kombu.exceptions").OperationalError,
        )

    def _drop(self) -> None:
        """Forget a broken connection without talking to the broker."""
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None:
            # Nothing more to release from a broken connection if this fails too.
            with contextlib.suppress(Exception):
                connection.collect()

    def close(self) -> None:
        with self._lock:
            connection, self._connection, self._channel = self._connection, None, None
            if connection is None:
                return
            try:
                connection.release()
            except Exception:  # a broker that went away cannot spoil shutting down
                connection.collect()
