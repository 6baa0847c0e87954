"""A publisher for RabbitMQ, Redis and anything else kombu speaks.

:class:`KombuPublisher` is what ``EVENTFERRY["PUBLISHER"]["BACKEND"]`` names: it checks
its OPTIONS (declared once, in :data:`OPTIONS`) and hands every batch to one of two
publishers, chosen by the URL's kombu transport when it is built:

- ``amqp://``/``amqps://`` (kombu's py-amqp transport):
  :class:`~eventferry_django.publishers.amqp_confirm.AmqpConfirmPublisher`, every batch
  pipelined with publisher confirms, one round trip per batch;
- ``redis://``/``rediss://`` with a direct or topic exchange:
  :class:`~eventferry_django.publishers.kombu_redis.KombuRedisPublisher`, kombu's message
  format written by one Redis pipeline per batch, no confirms;
- every other transport (``memory://``, ...), and fanout exchanges on Redis:
  :class:`~eventferry_django.publishers.kombu_producer.KombuProducerPublisher`, kombu's
  Producer, no confirms: a message counts as delivered once kombu hands it over.

Configure it with::

    EVENTFERRY = {"PUBLISHER": {
        "BACKEND": "eventferry_django.publishers.kombu.KombuPublisher",
        "OPTIONS": {"url": "amqp://guest:guest@localhost:5672//", "exchange": "orders"},
    }}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.core.checks import CheckMessage

from .amqp_confirm import AmqpConfirmPublisher
from .base import (  # RESERVED_HEADERS and broker_headers: re-exported, they lived here
    RESERVED_HEADERS,
    OutboundMessage,
    Publisher,
    PublishResult,
    broker_headers,
)
from .kombu_link import SHORTSTR_MAX, KombuSettings, kombu, transport_of
from .kombu_producer import KombuProducerPublisher
from .kombu_redis import KombuRedisPublisher
from .message_format import MessageFormat
from .options import (
    Option,
    OptionTable,
    boolean,
    positive_int_or_none,
    positive_seconds,
    raise_if_serious,
)
from .templates import TEMPLATE_FIELDS, key_function, key_problem

__all__ = ["OPTIONS", "RESERVED_HEADERS", "KombuPublisher", "broker_headers"]

#: Fields a ``routing_key`` format string may use.
ROUTING_KEY_FIELDS = TEMPLATE_FIELDS

EXCHANGE_TYPES = ("direct", "topic", "fanout", "headers")

#: The kombu transport whose batches get pipelined confirms.
CONFIRMING_DRIVER = "py-amqp"

#: kombu's Redis transport (``redis://``, ``rediss://``), whose batches get one pipeline.
REDIS_TRANSPORT = "kombu.transport.redis.Transport"


Delegate = AmqpConfirmPublisher | KombuRedisPublisher | KombuProducerPublisher


def _delegate_class(url: str, exchange_type: str) -> type[Delegate]:
    """The publisher that does the work for ``url``'s transport, without connecting."""
    transport = transport_of(url)
    if transport.driver_name == CONFIRMING_DRIVER:
        return AmqpConfirmPublisher
    # Not Sentinel's subclass: only the plain transport is tested on this path.
    kind = type(transport)
    plain_redis = f"{kind.__module__}.{kind.__qualname__}" == REDIS_TRANSPORT
    if plain_redis and exchange_type != "fanout":  # fanout on Redis is pub/sub
        return KombuRedisPublisher
    return KombuProducerPublisher


def _kombu_installed() -> bool:
    # Not importlib.util.find_spec: kombu swaps in a lazy module whose __spec__ is None.
    try:
        kombu()
    except ImportError:
        return False
    return True


URL_REQUIRED = "a broker URL is required, e.g. 'amqp://guest:guest@localhost//'"


def _url_problem(value: object) -> str | None:
    return None if isinstance(value, str) else URL_REQUIRED


def _exchange_problem(value: object) -> str | None:
    if isinstance(value, str) and len(value.encode()) <= SHORTSTR_MAX:
        return None
    return f"must be a string of at most {SHORTSTR_MAX} bytes"


def _exchange_type_problem(value: object) -> str | None:
    return None if value in EXCHANGE_TYPES else f"must be one of {', '.join(EXCHANGE_TYPES)}"


#: KombuPublisher's OPTIONS, declared once: ``check()`` and the constructor's defaults.
OPTIONS = OptionTable((
    Option("url", "eventferry.E030", _url_problem, required=URL_REQUIRED,
           required_id="eventferry.E030", is_url=True),
    Option("exchange", "eventferry.E032", _exchange_problem, default="eventferry"),
    Option("exchange_type", "eventferry.E032", _exchange_type_problem, default="topic"),
    Option("routing_key", "eventferry.E032", key_problem),
    Option("connect_timeout", "eventferry.E032", positive_seconds, default=5),
    Option("publish_timeout", "eventferry.E032", positive_seconds, default=10),
    Option("declare_exchange", "eventferry.E032", boolean, default=True),
    Option("max_message_bytes", "eventferry.E032", positive_int_or_none),
), unknown_id="eventferry.E031")

#: The OPTIONS' names (kept from before the table).
OPTION_NAMES = frozenset(OPTIONS.names)


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

    The work is done by :attr:`delegate`: an
    :class:`~eventferry_django.publishers.amqp_confirm.AmqpConfirmPublisher` for py-amqp
    URLs, a :class:`~eventferry_django.publishers.kombu_redis.KombuRedisPublisher` for
    Redis (one pipeline per batch) unless the exchange is fanout, a
    :class:`~eventferry_django.publishers.kombu_producer.KombuProducerPublisher` for the
    others (chosen from the URL and exchange type, without connecting).
    """

    def __init__(self, **options: Any) -> None:
        given = {**OPTIONS.defaults(), **options}
        super().__init__(**given)
        raise_if_serious(self.check(given))
        url: str = given["url"]  # check() reported E030 if it is missing
        self.settings = KombuSettings(
            url=url, exchange=given["exchange"], exchange_type=given["exchange_type"],
            routing_key=key_function(given["routing_key"]),
            connect_timeout=float(given["connect_timeout"]),
            publish_timeout=float(given["publish_timeout"]),
            declare_exchange=given["declare_exchange"],
            max_message_bytes=given["max_message_bytes"],
            message_format=MessageFormat.from_settings(),
        )
        self.delegate: Delegate = _delegate_class(url, self.settings.exchange_type)(
            self.settings)

    @classmethod
    def check(cls, options: Mapping[str, Any]) -> list[CheckMessage]:
        """The OPTIONS table's checks, then the URL's transport (without connecting)."""
        kombu_installed = _kombu_installed()
        messages = cls.missing_dependency(kombu_installed, "kombu", "kombu", "eventferry.E033")
        found = OPTIONS.check(cls, options)
        messages += found
        url = options.get("url")
        if kombu_installed and not any(m.id == "eventferry.E030" for m in found):
            messages += cls._check_url(str(url), options.get("exchange_type", "topic"))
        return messages

    @classmethod
    def _check_url(cls, url: str, exchange_type: object) -> list[CheckMessage]:
        """Resolve the URL's transport (which imports its client library) without connecting."""
        try:
            transport = transport_of(url)
        except Exception as exc:  # kombu raises KeyError, ImportError, ValueError...
            return [OPTIONS["url"].error(cls.__name__, url, f"kombu cannot use it ({exc!r})",
                                         "eventferry.E032")]
        if transport.driver_type != "amqp" and exchange_type == "headers":
            return [OPTIONS["exchange_type"].error(
                cls.__name__, exchange_type,
                f"the {transport.driver_type} transport has no headers exchanges",
            )]
        return []

    def describe(self) -> str:
        return f"KombuPublisher {self.settings.describe()}"

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        return self.delegate.publish(messages)

    def close(self) -> None:
        self.delegate.close()
