"""What a claimed row looks like on the wire (``EVENTFERRY["MESSAGE_FORMAT"]``): built
here once for every publisher, which only puts the result into its broker's frames.

``plain`` is eventferry's own format: the payload as the body, the event's headers plus
the reserved ones (:func:`~.base.broker_headers`). The CloudEvents 1.0 formats map the
row onto CloudEvents attributes: ``id`` the message id, ``type`` the topic, ``source``
``EVENTFERRY["CLOUDEVENTS_SOURCE"]``, ``time`` when the row was written, ``subject`` the
aggregate id, ``datacontenttype`` ``application/json``, and the extensions
``partitionkey`` (the partition key, or the aggregate id), ``aggregatetype``,
``traceparent`` (W3C trace context, when the row has one) and ``schemaversion`` (the
payload's schema version, when it has one).

The schema version is an extension, not ``dataschema``: ``dataschema`` must be a URI
naming the schema, while a version ("2", "2026-11") is what rows outlive deploys with;
a consumer switches on the extension without parsing a URI.

Binary mode (the AMQP binding, applied to AMQP 0-9-1 headers) puts each attribute in a
header named ``cloudEvents_<attribute>`` and the payload, unchanged, in the body;
``datacontenttype`` is the message's content type. ``cloudEvents_`` is the prefix the
current AMQP binding prefers (``cloudEvents:`` is not a valid JMS property name, so JMS
2.0 clients could not read it); receivers, this one's inbox included, accept both.
Structured mode sends one ``application/cloudevents+json`` document whose ``data`` is
the payload, unchanged.

Another protocol binding names and spells its headers otherwise: a publisher passes its
:class:`HeaderBinding` (:data:`NATS_BINDING`: ``ce-<attribute>`` headers, percent-encoded
values, ``datacontenttype`` a header like the others; :data:`KAFKA_BINDING`:
``ce_<attribute>`` headers, ``datacontenttype`` the record's ``content-type`` header,
which the publisher sets) and the envelope follows it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from .base import OutboundMessage, broker_headers, json_text

JSON = "application/json"
CLOUDEVENTS_JSON = "application/cloudevents+json"
#: The AMQP binding's header prefix, as written; both spellings are read.
CLOUDEVENTS_PREFIX = "cloudEvents_"
CLOUDEVENTS_PREFIXES = (CLOUDEVENTS_PREFIX, "cloudEvents:")

#: What the NATS binding leaves unencoded: printable ASCII but space, ``"`` and ``%``.
_NATS_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in '"%')


def _as_is(value: str) -> str:
    return value


def percent_encode(value: str) -> str:
    """A header value as the NATS binding spells it: UTF-8, each byte outside printable
    ASCII, and space, ``"`` and ``%``, as ``%XY``."""
    return quote(value, safe=_NATS_SAFE)


def percent_decode(value: str) -> str:
    """The value :func:`percent_encode` spelt; invalid UTF-8 raises ``ValueError``."""
    return unquote(value, errors="strict")


@dataclass(frozen=True)
class HeaderBinding:
    """How a CloudEvents protocol binding carries the attributes in binary mode: the
    header names' prefix, how a value is spelt, and whether ``datacontenttype`` is a
    header too or the message's own content type (AMQP's property)."""

    #: Written before each attribute's name.
    prefix: str
    #: Every prefix a receiver accepts, ``prefix`` first.
    accepted: tuple[str, ...]
    content_type_header: bool = False
    encode: Callable[[str], str] = _as_is
    decode: Callable[[str], str] = _as_is


#: The AMQP binding (also used for Celery's task headers and kombu's other transports).
AMQP_BINDING = HeaderBinding(CLOUDEVENTS_PREFIX, CLOUDEVENTS_PREFIXES)
#: The NATS binding (CloudEvents' ``nats-protocol-binding.md``, binary mode since NATS
#: 2.2): ``ce-`` headers, values percent-encoded, ``ce-datacontenttype`` sent.
NATS_BINDING = HeaderBinding("ce-", ("ce-",), content_type_header=True,
                             encode=percent_encode, decode=percent_decode)
#: The Kafka binding (``kafka-protocol-binding.md``): ``ce_`` headers; ``datacontenttype``
#: is the ``content-type`` header, which the Kafka publisher writes for every record.
KAFKA_BINDING = HeaderBinding("ce_", ("ce_",))


@dataclass(frozen=True)
class Envelope:
    """One message as a publisher sends it: the body (JSON text), its content type and
    its headers (AMQP application headers, a Celery task's, or a Kafka record's)."""

    body: str
    content_type: str
    headers: dict[str, Any]


class MessageFormat:
    """Turns claimed rows into :class:`Envelope` s in one of :data:`MESSAGE_FORMATS
    <eventferry_django.message_settings.MESSAGE_FORMATS>`."""

    def __init__(self, name: str = "plain", source: str | None = None,
                 binding: HeaderBinding = AMQP_BINDING) -> None:
        if name != "plain" and source is None:
            raise ValueError(f"message format {name!r} needs a CloudEvents source.")
        self.name = name
        self.source = source
        self.binding = binding

    @classmethod
    def from_settings(cls, binding: HeaderBinding = AMQP_BINDING) -> MessageFormat:
        from ..conf import get_settings

        settings = get_settings()
        return cls(settings.message_format, settings.cloudevents_source, binding)

    @property
    def content_type(self) -> str:
        """Every message's content type in this format."""
        return CLOUDEVENTS_JSON if self.name == "cloudevents-structured" else JSON

    def envelope(self, message: OutboundMessage) -> Envelope:
        if self.name == "plain":
            return Envelope(message.payload, JSON, broker_headers(message))
        attributes = self.attributes(message)
        binding = self.binding
        own = {k: v for k, v in message.headers.items() if not k.startswith(binding.accepted)}
        if self.name == "cloudevents-binary":
            if not binding.content_type_header:
                del attributes["datacontenttype"]  # it is the message's content type
            headers = {**own, **{binding.prefix + k: binding.encode(v)
                                 for k, v in attributes.items()}}
            return Envelope(message.payload, JSON, headers)
        return Envelope(structured(attributes, message.payload), CLOUDEVENTS_JSON, own)

    def attributes(self, message: OutboundMessage) -> dict[str, Any]:
        """The CloudEvents context attributes of ``message``, as strings."""
        attributes = {
            "specversion": "1.0",
            "id": message.message_id,
            "source": self.source,
            "type": message.topic,
            "subject": message.aggregate_id,
            "datacontenttype": JSON,
            "partitionkey": message.effective_partition_key,
            "aggregatetype": message.aggregate_type,
        }
        if message.created_at is not None:
            attributes["time"] = rfc3339(message.created_at)
        if message.trace_id is not None:
            attributes["traceparent"] = message.trace_id
        if message.schema_version is not None:
            attributes["schemaversion"] = message.schema_version
        return attributes


def structured(attributes: Mapping[str, Any], payload: str) -> str:
    """The structured-mode document: the attributes, and the payload text unchanged as
    ``data`` (no decoding and re-encoding of what the outbox stored)."""
    return json_text(dict(attributes))[:-1] + f', "data": {payload}}}'


def rfc3339(moment: dt.datetime) -> str:
    """``moment`` in UTC, to the millisecond, as CloudEvents' ``time`` spells it."""
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def cloudevent_id(body: Any, content_type: str | None, headers: Mapping[str, Any] | None,
                  binding: HeaderBinding = AMQP_BINDING) -> str | None:
    """The ``id`` of a CloudEvent received in either mode, or None when the message is
    not one: binary mode names it in a header (AMQP: ``cloudEvents_id`` or
    ``cloudEvents:id``; NATS: ``ce-id``; Kafka: ``ce_id``), structured mode in its
    document."""
    for prefix in binding.accepted:
        value = (headers or {}).get(prefix + "id")
        if value is not None:
            return binding.decode(value if isinstance(value, str) else str(value))
    if content_type is not None and content_type.startswith(CLOUDEVENTS_JSON):
        try:
            document = json.loads(body) if isinstance(body, str | bytes) else body
        except ValueError:
            return None
        identifier = document.get("id") if isinstance(document, Mapping) else None
        if isinstance(identifier, str):
            return identifier
    return None
