"""What :class:`~eventferry_django.publishers.kafka.KafkaPublisher` accepts in its
OPTIONS, and the librdkafka configuration it builds from them.

The publisher's promises (each event delivered once it is on every in-sync replica, an
aggregate's events in order on one partition, retries that neither reorder nor
duplicate) rest on a few librdkafka settings: the idempotent producer with
``acks=all``. Those are set here and cannot be overridden through ``producer``; the
settings the publisher needs for itself (the brokers, the delivery timeout, the
callbacks) are refused there too, each with the reason, by ``manage.py check``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .base import OutboundMessage
from .templates import KeyFunction, is_template, key_function, template_problem

#: librdkafka's producer settings the publisher fixes, and why a user may not change
#: them: (names, a predicate for the values that are accepted, why).
Guarantee = tuple[tuple[str, ...], Callable[[object], bool], str]

#: At most this many requests in flight per connection: the idempotent producer keeps
#: order only up to it.
MAX_IN_FLIGHT = 5

#: The partitioner unless ``producer`` names one: the Java client's for keyed records, so
#: an aggregate lands on the same partition as the records Java producers (Debezium,
#: Kafka Connect, Kafka Streams) write under the same key.
DEFAULT_PARTITIONER = "murmur2_random"

#: A Kafka topic name: at most 249 of these characters, and not "." or "..".
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")

#: Settings whose values are secrets: shown as ``****`` in messages.
SECRET_SETTING = re.compile(r"password|secret|\.pem$|jaas|oauthbearer\.config", re.I)


def _is_false(value: object) -> bool:
    return value is False or str(value).strip().lower() in {"false", "0"}


def _acks_all(value: object) -> bool:
    return str(value).strip().lower() in {"all", "-1"}


def _in_flight_ok(value: object) -> bool:
    try:
        return 0 < int(str(value)) <= MAX_IN_FLIGHT
    except ValueError:
        return False


GUARANTEES: tuple[Guarantee, ...] = (
    (("acks", "request.required.acks"), _acks_all,
     "only 'all' (-1) is accepted: any other value counts a message delivered before "
     "every in-sync replica has it, so a broker failure can lose an acked event"),
    (("enable.idempotence",), lambda value: not _is_false(value),
     "the idempotent producer is what keeps librdkafka's retries from reordering or "
     "duplicating an aggregate's events; it cannot be turned off"),
    (("max.in.flight.requests.per.connection", "max.in.flight"), _in_flight_ok,
     f"must be 1 to {MAX_IN_FLIGHT}: above that the idempotent producer cannot keep order"),
    (("transactional.id",), lambda value: False,
     "the publisher does not use transactions (the outbox is its transaction); a "
     "transactional producer would refuse every produce outside one"),
)

#: Settings given elsewhere: name -> where.
OWNED = {
    "bootstrap.servers": "repeats OPTIONS['bootstrap_servers']: give the brokers there only",
    "metadata.broker.list": "repeats OPTIONS['bootstrap_servers']: give the brokers there only",
    "message.timeout.ms": "set OPTIONS['delivery_timeout'] (seconds) instead: it also bounds "
                          "how long a batch waits for its delivery reports",
    "delivery.timeout.ms": "set OPTIONS['delivery_timeout'] (seconds) instead: it also bounds "
                           "how long a batch waits for its delivery reports",
}

#: confluent-kafka's Python callbacks besides the ``*_cb`` ones.
CALLBACKS = frozenset({"on_delivery", "logger", "on_commit"})


def setting_problem(name: object, value: object) -> str | None:
    """Why ``name = value`` cannot be in ``producer``, or None when it can."""
    if not isinstance(name, str) or not name.strip():
        return f"{name!r} is not a librdkafka setting name"
    if name in CALLBACKS or name.endswith("_cb") or callable(value):
        return (f"{name!r} names a callback: the publisher owns the delivery reports, error "
                "and log callbacks, which its guarantees depend on")
    if name in OWNED:
        return f"{name!r} {OWNED[name]}"
    for names, accepted, why in GUARANTEES:
        if name in names and not accepted(value):
            return f"{name!r} = {value!r}: {why}"
    if not isinstance(value, str | int | float | bool):
        return f"{name!r} = {value!r}: a librdkafka setting is a string, number or boolean"
    return None


def producer_problem(value: object) -> str | None:
    """Why ``value`` cannot be the ``producer`` option, or None when it can."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return "must be a dict of librdkafka producer settings"
    problems = [p for name, setting in value.items()
                if (p := setting_problem(name, setting)) is not None]
    return "; ".join(problems) or None


def mask_secrets(value: object) -> object:
    """``value`` with the values of secret settings (passwords, keys) replaced by
    ``****``: for messages."""
    if not isinstance(value, Mapping):
        return value
    return {name: "****" if isinstance(name, str) and SECRET_SETTING.search(name) else setting
            for name, setting in value.items()}


def servers_problem(value: object) -> str | None:
    if isinstance(value, str) and value.strip():
        return None
    if (isinstance(value, list | tuple) and value
            and all(isinstance(server, str) and server.strip() for server in value)):
        return None
    return "must be 'host:port,...' or a list of 'host:port' strings"


def servers_text(value: str | list[str] | tuple[str, ...]) -> str:
    """The brokers as librdkafka's comma-separated ``bootstrap.servers``."""
    return value if isinstance(value, str) else ",".join(value)


def topic_name_problem(topic: str) -> str | None:
    """Why ``topic`` cannot name a Kafka topic, or None when it can."""
    if TOPIC_NAME.fullmatch(topic) and topic not in {".", ".."}:
        return None
    return ("is not a valid Kafka topic name (1 to 249 letters, digits, '.', '_' or '-', "
            "and not '.' or '..')")


def topic_problem(value: object) -> str | None:
    """Why ``value`` cannot be the ``topic`` option: a template over the event's fields,
    or one topic for every event."""
    if value is None:
        return None
    if not isinstance(value, str):
        return "must be a topic name or a format string such as '{topic}'"
    if is_template(value):
        return template_problem(value)
    return topic_name_problem(value)


def topic_function(value: str | None) -> KeyFunction:
    """The checked ``topic`` option as a function of the message."""
    if value is None or is_template(value):
        return key_function(value)

    def constant(message: OutboundMessage) -> str:
        return value

    return constant


def confluent_kafka() -> Any:
    """The confluent_kafka module, imported on first use so this package imports without
    it (typed as Any: it ships no type information for most of its API)."""
    return importlib.import_module("confluent_kafka")


def is_installed() -> bool:
    try:
        confluent_kafka()
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class KafkaSettings:
    """KafkaPublisher's OPTIONS, validated and typed."""

    bootstrap_servers: str
    topic: str | None
    producer: Mapping[str, Any]
    delivery_timeout: float

    def config(self, **callbacks: Any) -> dict[str, Any]:
        """librdkafka's configuration: the user's settings, then the ones the publisher's
        guarantees need, then ``callbacks`` (``error_cb``, ``logger``)."""
        timeout_ms = round(self.delivery_timeout * 1000)
        config: dict[str, Any] = {
            "partitioner": DEFAULT_PARTITIONER,
            # An unknown topic is dead, not timed out: librdkafka must give up waiting for
            # it to appear well before the delivery timeout.
            "topic.metadata.propagation.max.ms": max(timeout_ms // 2, 1),
            **self.producer,
            "bootstrap.servers": self.bootstrap_servers,
            "enable.idempotence": True,
            "acks": "all",
            "message.timeout.ms": timeout_ms,
            **callbacks,
        }
        return config

    def refused_by_librdkafka(self) -> str | None:
        """Whether librdkafka refuses the configuration (an unknown setting, a bad value
        or an inconsistent pair), asked by building a client without brokers, which
        connects nowhere; None when it takes it."""
        config = {name: value for name, value in self.config().items()
                  if name != "bootstrap.servers"}
        try:
            client = confluent_kafka().Producer({**config, "log_level": 0})
        except Exception as exc:  # KafkaException, or TypeError/ValueError for a value
            error: Any = exc.args[0] if exc.args else exc
            # A KafkaError's str() is its repr; its str method, librdkafka's own words.
            return str(error.str() if callable(getattr(error, "str", None)) else error)
        del client
        return None
