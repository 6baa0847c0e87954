"""A publisher for RabbitMQ, Redis and anything else kombu speaks.

On RabbitMQ (the ``amqp://``/``amqps://`` URLs, driven by py-amqp) every batch is
published with publisher confirms, pipelined: all messages of the batch go out first and
the broker's acks are collected once for the batch, so a batch of 500 costs one round
trip, not 500. kombu's own ``confirm_publish`` transport option waits for each message in
turn, which is exactly the per-message round trip this module avoids.

Other transports (``redis://``, ``memory://``, ...) have no confirms: a message counts as
delivered once kombu hands it over without raising.

Configure it with::

    EVENTFERRY = {"PUBLISHER": {
        "BACKEND": "eventferry_django.publishers.kombu.KombuPublisher",
        "OPTIONS": {"url": "amqp://guest:guest@localhost:5672//", "exchange": "orders"},
    }}
"""

from __future__ import annotations

import contextlib
import importlib
import numbers
import string
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from django.core.checks import CheckMessage, Error
from django.utils.module_loading import import_string

from ..exceptions import ConfigurationError
from .amqp_frames import EncodingError, PublishFrames
from .base import (  # RESERVED_HEADERS and broker_headers: re-exported, they lived here
    RESERVED_HEADERS,
    BrokerUnavailable,
    OutboundMessage,
    Outcome,
    Publisher,
    PublishResult,
    broker_headers,
    mask_url,
)

#: Fields a ``routing_key`` format string may use.
ROUTING_KEY_FIELDS = frozenset({"topic", "aggregate_type", "aggregate_id", "partition_key"})

EXCHANGE_TYPES = ("direct", "topic", "fanout", "headers")

OPTION_NAMES = frozenset({
    "url", "exchange", "exchange_type", "routing_key", "connect_timeout", "publish_timeout",
    "declare_exchange", "max_message_bytes",
})

CONTENT_TYPE = "application/json"
CONTENT_ENCODING = "utf-8"

#: AMQP ``shortstr`` fields (routing key, message id, exchange) hold at most 255 bytes.
SHORTSTR_MAX = 255

__all__ = ["RESERVED_HEADERS", "KombuPublisher", "broker_headers"]

RoutingKey = Callable[[OutboundMessage], str]


class _Unsendable(Exception):
    """This message, and only this one, cannot be encoded or sent: it gets GIVE_UP."""


def _kombu() -> Any:
    """The kombu module, imported on first use so this module imports without it.

    Typed as Any: kombu ships ``py.typed`` but leaves much unannotated, which strict mypy
    would reject call by call.
    """
    return importlib.import_module("kombu")


def _kombu_installed() -> bool:
    # Not importlib.util.find_spec: kombu swaps in a lazy module whose __spec__ is None.
    try:
        _kombu()
    except ImportError:
        return False
    return True


def _is_positive_number(value: object) -> bool:
    return (
        isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value) > 0
    )


def _format_fields(template: str) -> list[str | None]:
    """Field names of a ``str.format`` template (None for a positional ``{}``)."""
    return [
        field_name or None
        for _, field_name, _, _ in string.Formatter().parse(template)
        if field_name is not None
    ]


def _routing_key_problem(value: object) -> str | None:
    """Why ``value`` cannot be a ``routing_key`` option, or None when it can."""
    if value is None or (callable(value) and not isinstance(value, str)):
        return None
    if not isinstance(value, str):
        return "must be a format string or the dotted path of a callable"
    if "{" in value or "}" in value:
        try:
            fields = _format_fields(value)
        except ValueError as exc:
            return f"is not a valid format string ({exc})"
        unknown = [f for f in fields if f not in ROUTING_KEY_FIELDS]
        if unknown:
            return (
                f"uses {', '.join(repr(f) if f else '{}' for f in unknown)}; a format string "
                f"may use only {', '.join('{' + f + '}' for f in sorted(ROUTING_KEY_FIELDS))}"
            )
        return None
    # Without braces it names a callable; a constant key would silently hide a typo.
    try:
        target = import_string(value)
    except ImportError as exc:
        return (
            "has no {placeholders}, so it must be the dotted path of a callable "
            f"(OutboundMessage) -> str, but it cannot be imported: {exc}"
        )
    if not callable(target):
        return "names something that is not callable"
    return None


def _routing_key_function(value: object) -> RoutingKey:
    """Turn a validated ``routing_key`` option into a function of the message."""
    if value is None:
        value = "{topic}"
    if isinstance(value, str) and ("{" in value or "}" in value):
        template = value

        def from_template(message: OutboundMessage) -> str:
            return template.format_map({
                "topic": message.topic,
                "aggregate_type": message.aggregate_type,
                "aggregate_id": message.aggregate_id,
                "partition_key": message.effective_partition_key,
            })

        return from_template
    target = import_string(value) if isinstance(value, str) else value
    if not callable(target):
        raise ConfigurationError(f"KombuPublisher routing_key {value!r} is not callable.")
    function: RoutingKey = target
    return function


def _error(option: str, value: object, problem: str, check_id: str) -> Error:
    if option == "url" and isinstance(value, str):
        value = mask_url(value)
    return Error(
        f"KombuPublisher OPTIONS[{option!r}] is {value!r}: {problem}.",
        hint="See the KombuPublisher docstring for the accepted OPTIONS.",
        id=check_id,
    )


class _ConfirmBatch:
    """Delivery tags of one pipelined batch, waiting for the broker's acks or nacks.

    RabbitMQ numbers the messages of a confirm-mode channel 1, 2, 3... and may confirm
    several at once (``multiple``); an unroutable ``mandatory`` message comes back as a
    ``basic.return`` just before its ack, identified only by its properties, hence the
    lookup by ``message_id``.
    """

    def __init__(self, size: int, exchange: str) -> None:
        self.results: list[PublishResult | None] = [None] * size
        self.exchange = exchange
        self.pending: dict[int, int] = {}  # delivery tag -> index in results
        self.unroutable: dict[int, str] = {}  # delivery tag -> error
        self.by_message_id: dict[str, deque[int]] = {}
        self.lowest = 0

    def sent(self, tag: int, index: int, message_id: str) -> None:
        if not self.pending:
            self.lowest = tag
        self.pending[tag] = index
        self.by_message_id.setdefault(message_id, deque()).append(tag)

    def settle(self, tag: int, multiple: bool, nacked: bool) -> None:
        tags: Iterable[int] = range(self.lowest, tag + 1) if multiple else (tag,)
        for settled in tags:
            index = self.pending.pop(settled, None)
            if index is None:
                continue
            if nacked:
                result = PublishResult(Outcome.RETRY, "nacked by the broker")
            elif settled in self.unroutable:
                result = PublishResult(Outcome.RETRY, self.unroutable.pop(settled))
            else:
                result = PublishResult.ok()
            self.results[index] = result
        if multiple:
            self.lowest = max(self.lowest, tag + 1)

    def returned(self, message_id: str | None, routing_key: str, reply_text: str) -> None:
        tags = self.by_message_id.get(message_id or "")
        while tags:
            tag = tags.popleft()
            if tag in self.pending:
                self.unroutable[tag] = (
                    f"unroutable: no queue bound to exchange {self.exchange!r} with routing "
                    f"key {routing_key!r} ({reply_text})"
                )
                return


class KombuPublisher(Publisher):
    """Publishes each message to an exchange through kombu.

    OPTIONS:

    ``url`` (required)
        A kombu broker URL: ``amqp://guest:guest@localhost:5672//``,
        ``redis://localhost:6379/0``, ``memory://`` (in-process, for demos and tests).
    ``exchange`` (``"eventferry"``), ``exchange_type`` (``"topic"``)
        Where messages go. The exchange is durable. ``""`` is AMQP's default exchange.
    ``routing_key`` (``"{topic}"``)
        A format string using ``{topic}``, ``{aggregate_type}``, ``{aggregate_id}`` and
        ``{partition_key}``, or the dotted path of (or a reference to) a callable
        ``(OutboundMessage) -> str``. A string without braces must name a callable, so a
        misspelt path is reported by ``manage.py check`` instead of becoming a key.
    ``connect_timeout`` (5), ``publish_timeout`` (10)
        Seconds. On RabbitMQ ``publish_timeout`` bounds a whole batch: writing it and
        waiting for all its confirms; on Redis it bounds each command. When either runs
        out, :class:`BrokerUnavailable` is raised.
    ``declare_exchange`` (True)
        Declare the exchange once per connection. Turn off when the broker's topology is
        managed elsewhere and this user may not declare. Virtual transports (Redis,
        memory) always declare, because there a declaration is only local bookkeeping
        that kombu needs to route by the exchange's type.
    ``max_message_bytes`` (None)
        A message whose body is larger is not sent and gets ``GIVE_UP``. Set it below the
        broker's own limit (RabbitMQ's ``max_message_size``): the broker answers an
        oversized message by closing the channel, which fails the whole batch.

    Every message is persistent, ``application/json`` encoded as UTF-8, its body the
    row's payload text unchanged, its ``message_id`` the row's, its headers the event's
    own plus :data:`RESERVED_HEADERS` (see :func:`broker_headers`).

    Outcomes on RabbitMQ: acked -> ``OK``; nacked -> ``RETRY``; returned as unroutable (no
    queue bound, messages are published ``mandatory``) -> ``RETRY``, since a queue may be
    bound later; too large or not encodable -> ``GIVE_UP``. On Redis and memory an
    unroutable message is also ``RETRY`` (kombu would otherwise drop it silently), and
    anything kombu accepts is ``OK``. Fanout exchanges on Redis are pub/sub: a message
    nobody listens to at that moment is lost, so prefer ``topic`` or ``direct`` there.

    A broker that cannot be reached, a connection that breaks, a channel the broker closes
    and confirms that do not arrive in time all raise :class:`BrokerUnavailable`; the
    connection is dropped and the next :meth:`publish` reconnects. Messages of such a
    batch may have reached the broker and will be sent again: delivery is at least once.

    Order: a batch is written in the order given on one channel, so RabbitMQ (and Redis,
    per list) keeps it within each queue the messages reach; the relay hands it a chain
    in id order in one call. Consumers that prefetch several messages and handle them in
    parallel, or several consumers on one queue, can still process them out of order.

    One connection and channel serve every batch until :meth:`close`. Calls are
    serialised by a lock, as a connection must not be shared between threads.
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        exchange: str = "eventferry",
        exchange_type: str = "topic",
        routing_key: str | RoutingKey | None = None,
        connect_timeout: float = 5,
        publish_timeout: float = 10,
        declare_exchange: bool = True,
        max_message_bytes: int | None = None,
        **options: Any,
    ) -> None:
        given = dict(
            url=url, exchange=exchange, exchange_type=exchange_type, routing_key=routing_key,
            connect_timeout=connect_timeout, publish_timeout=publish_timeout,
            declare_exchange=declare_exchange, max_message_bytes=max_message_bytes,
            **options,
        )
        super().__init__(**given)
        errors = [m for m in self.check(given) if m.is_serious()]
        if errors:
            raise ConfigurationError(" ".join(str(m.msg) for m in errors))
        assert url is not None  # check() reported E030 otherwise
        self.url = url
        self.exchange = exchange
        self.exchange_type = exchange_type
        self.routing_key = _routing_key_function(routing_key)
        self.connect_timeout = float(connect_timeout)
        self.publish_timeout = float(publish_timeout)
        self.declare_exchange = declare_exchange
        self.max_message_bytes = max_message_bytes
        self._lock = threading.Lock()
        self._connection: Any = None  # kombu.Connection
        self._channel: Any = None
        self._producer: Any = None  # kombu.Producer, virtual transports only
        #: Publisher confirms are on exactly when this is set (RabbitMQ via py-amqp).
        self._frames: PublishFrames | None = None
        self._delivery_tag = 0
        self._batch: _ConfirmBatch | None = None

    @classmethod
    def check(cls, options: Mapping[str, Any]) -> list[CheckMessage]:
        messages: list[CheckMessage] = []
        kombu_installed = _kombu_installed()
        messages += cls.missing_dependency(kombu_installed, "kombu", "kombu", "eventferry.E033")
        messages += cls.unknown_options(options, OPTION_NAMES, "eventferry.E031")

        url = options.get("url")
        if not isinstance(url, str) or not url.strip():
            messages.append(_error(
                "url", url, "a broker URL is required, e.g. 'amqp://guest:guest@localhost//'",
                "eventferry.E030",
            ))
        elif kombu_installed:
            messages += cls._check_url(url, options.get("exchange_type", "topic"))

        exchange = options.get("exchange", "eventferry")
        if not isinstance(exchange, str) or len(exchange.encode()) > SHORTSTR_MAX:
            messages.append(_error(
                "exchange", exchange, f"must be a string of at most {SHORTSTR_MAX} bytes",
                "eventferry.E032",
            ))
        exchange_type = options.get("exchange_type", "topic")
        if exchange_type not in EXCHANGE_TYPES:
            messages.append(_error(
                "exchange_type", exchange_type, f"must be one of {', '.join(EXCHANGE_TYPES)}",
                "eventferry.E032",
            ))
        problem = _routing_key_problem(options.get("routing_key"))
        if problem:
            messages.append(_error(
                "routing_key", options.get("routing_key"), problem, "eventferry.E032",
            ))
        for name in ("connect_timeout", "publish_timeout"):
            if name in options and not _is_positive_number(options[name]):
                messages.append(_error(
                    name, options[name], "must be a positive number of seconds",
                    "eventferry.E032",
                ))
        declare = options.get("declare_exchange", True)
        if not isinstance(declare, bool):
            messages.append(_error(
                "declare_exchange", declare, "must be True or False", "eventferry.E032",
            ))
        limit = options.get("max_message_bytes")
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0
        ):
            messages.append(_error(
                "max_message_bytes", limit, "must be a positive integer or None",
                "eventferry.E032",
            ))
        return messages

    @staticmethod
    def _check_url(url: str, exchange_type: object) -> list[CheckMessage]:
        """Resolve the URL's transport (which imports its client library) without connecting."""
        try:
            transport = _kombu().Connection(url).transport
        except Exception as exc:  # kombu raises KeyError, ImportError, ValueError...
            return [_error("url", url, f"kombu cannot use it ({exc!r})", "eventferry.E032")]
        if transport.driver_type != "amqp" and exchange_type == "headers":
            return [_error(
                "exchange_type", exchange_type,
                f"the {transport.driver_type} transport has no headers exchanges",
                "eventferry.E032",
            )]
        return []

    def describe(self) -> str:
        return (f"KombuPublisher {mask_url(self.url)} exchange {self.exchange!r} "
                f"({self.exchange_type})")

    # -- connection ------------------------------------------------------------------

    def _connect(self) -> None:
        kombu = _kombu()
        connection = kombu.Connection(
            self.url,
            connect_timeout=self.connect_timeout,
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
            frames = None
            if connection.transport.driver_name == "py-amqp":
                frames = PublishFrames(channel.channel_id, connection.connection.frame_max,
                                       self.exchange, CONTENT_TYPE, CONTENT_ENCODING)
                channel.confirm_select()
                channel.events["basic_ack"].add(self._on_ack)
                channel.events["basic_nack"].add(self._on_nack)
                channel.events["basic_return"].add(self._on_return)
            exchange = kombu.Exchange(
                self.exchange, type=self.exchange_type, durable=True, auto_delete=False,
            )
            # The default exchange ("") and amq.* ones exist already and refuse declaring.
            virtual = connection.transport.driver_type != "amqp"
            declare = bool(self.exchange) and (virtual or (
                self.declare_exchange and not self.exchange.startswith("amq.")
            ))
            if declare:
                exchange(channel).declare()
            producer = None if frames else kombu.Producer(
                channel, exchange=exchange, auto_declare=False,
            )
        except errors as exc:
            connection.collect()
            raise BrokerUnavailable(f"Cannot connect to the broker at {uri}: {exc!r}") from exc
        self._connection, self._channel, self._producer = connection, channel, producer
        self._frames = frames
        self._delivery_tag = 0

    def _transport_options(self) -> dict[str, Any]:
        driver_type = _kombu().Connection(self.url).transport.driver_type
        if driver_type == "amqp":
            # Socket-level bounds as a backstop for every blocking call, close() included.
            return {"read_timeout": self.publish_timeout, "write_timeout": self.publish_timeout}
        if driver_type == "redis":
            return {
                "socket_timeout": self.publish_timeout,
                "socket_connect_timeout": self.connect_timeout,
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
        connection, self._connection = self._connection, None
        self._channel = self._producer = self._batch = None
        if connection is not None:
            # Nothing more to release from a broken connection if this fails too.
            with contextlib.suppress(Exception):
                connection.collect()

    def close(self) -> None:
        with self._lock:
            connection, self._connection = self._connection, None
            self._channel = self._producer = self._batch = None
            if connection is None:
                return
            try:
                connection.release()
            except Exception:  # a broker that went away cannot spoil shutting down
                connection.collect()

    # -- publishing ------------------------------------------------------------------

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        if not messages:
            return []
        with self._lock:
            if self._connection is None:
                self._connect()
            errors = self._errors(self._connection)
            try:
                if self._frames is not None:
                    return self._publish_confirmed(messages)
                return self._publish_unconfirmed(messages)
            except TimeoutError as exc:  # socket.timeout is TimeoutError
                uri = self._connection.as_uri()
                self._drop()
                raise BrokerUnavailable(
                    f"The broker at {uri} did not answer within {self.publish_timeout}s: "
                    f"{exc!r}"
                ) from exc
            except errors as exc:
                uri = self._connection.as_uri()
                self._drop()
                raise BrokerUnavailable(f"Lost the broker at {uri}: {exc!r}") from exc
            except BaseException:
                # Half a batch may be on the wire: no later batch can trust this connection.
                self._drop()
                raise

    def _body(self, message: OutboundMessage) -> bytes:
        try:
            body = message.payload.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _Unsendable(f"payload cannot be encoded as UTF-8: {exc}") from exc
        if self.max_message_bytes is not None and len(body) > self.max_message_bytes:
            raise _Unsendable(
                f"payload is {len(body)} bytes, more than max_message_bytes "
                f"({self.max_message_bytes}); not sent"
            )
        return body

    def _routing_key_for(self, message: OutboundMessage) -> str:
        try:
            key = self.routing_key(message)
        except Exception as exc:  # a user's callable or format spec
            raise _Unsendable(f"routing_key failed: {exc!r}") from exc
        if not isinstance(key, str):
            raise _Unsendable(f"routing_key returned {key!r}, not a string")
        if len(key.encode("utf-8", "surrogatepass")) > SHORTSTR_MAX:
            raise _Unsendable(f"routing key is longer than {SHORTSTR_MAX} bytes: {key[:60]!r}...")
        return key

    def _publish_confirmed(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        """Write the whole batch in one ``sendall``, then read confirms until all are in
        or time runs out."""
        assert self._frames is not None
        deadline = time.monotonic() + self.publish_timeout
        batch = self._batch = _ConfirmBatch(len(messages), self.exchange)
        wire = bytearray()
        for index, message in enumerate(messages):
            try:
                wire += self._frames.message(
                    self._routing_key_for(message), self._body(message),
                    message.message_id, broker_headers(message),
                )
            except (_Unsendable, EncodingError) as exc:
                batch.results[index] = PublishResult(Outcome.GIVE_UP, str(exc))
                continue
            self._delivery_tag += 1
            batch.sent(self._delivery_tag, index, message.message_id)
        amqp_connection = self._connection.connection
        if wire:
            transport = amqp_connection.transport
            with transport.having_timeout(self.publish_timeout):
                transport.write(wire)
        while batch.pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{len(batch.pending)} of {len(messages)} messages "
                                   "not confirmed")
            amqp_connection.drain_events(timeout=remaining)
        self._batch = None
        return [r if r is not None else PublishResult.ok() for r in batch.results]

    def _on_ack(self, delivery_tag: int, multiple: bool) -> None:
        if self._batch is not None:
            self._batch.settle(delivery_tag, multiple, nacked=False)

    def _on_nack(self, delivery_tag: int, multiple: bool) -> None:
        if self._batch is not None:
            self._batch.settle(delivery_tag, multiple, nacked=True)

    def _on_return(self, exc: Exception, exchange: str, routing_key: str, message: Any) -> None:
        if self._batch is not None:
            self._batch.returned(message.properties.get("message_id"), routing_key, str(exc))

    def _publish_unconfirmed(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        """Hand each message to kombu; without confirms, no exception means delivered."""
        routable: dict[str, bool] = {}
        results = []
        for message in messages:
            try:
                routing_key = self._routing_key_for(message)
                body = self._body(message)
            except _Unsendable as exc:
                results.append(PublishResult(Outcome.GIVE_UP, str(exc)))
                continue
            if routing_key not in routable:
                routable[routing_key] = self._has_route(routing_key)
            if not routable[routing_key]:
                results.append(PublishResult(
                    Outcome.RETRY,
                    f"unroutable: no queue bound to exchange {self.exchange!r} with routing "
                    f"key {routing_key!r}",
                ))
                continue
            self._producer.publish(
                body,
                routing_key=routing_key,
                content_type=CONTENT_TYPE,
                content_encoding=CONTENT_ENCODING,
                headers=broker_headers(message),
                delivery_mode=2,
                message_id=message.message_id,
                retry=False,
                timeout=self.publish_timeout,
            )
            results.append(PublishResult.ok())
        return results

    def _has_route(self, routing_key: str) -> bool:
        """Whether a virtual transport would route ``routing_key`` to any queue.

        kombu's virtual transports drop a message no binding matches without a word; this
        asks the binding table (one Redis round trip per distinct key and batch).
        """
        if not self.exchange:  # the default exchange routes to the queue named by the key
            return True
        channel = self._channel
        try:
            table = channel.get_table(self.exchange)
            queues = channel.typeof(self.exchange).lookup(table, self.exchange, routing_key, None)
        except KeyError:
            return False
        return bool(queues)
