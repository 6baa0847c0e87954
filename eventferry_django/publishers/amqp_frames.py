"""AMQP 0-9-1 ``basic.publish`` frames, encoded directly for the kombu publisher.

py-amqp encodes every message through its general-purpose serializer, which costs more
Python time per message than the database spends on the row. The relay's messages
always carry the same few properties, so their frames are cheap to lay out here. Header
tables still go through py-amqp's own encoder, so every header value is typed exactly as
py-amqp would type it.

Frame layout (AMQP 0-9-1, section 4.2.3): one octet type, a short channel, a long
payload size, the payload, and the end octet 0xCE. A message is a method frame
(``basic.publish``), a content header frame (body size and properties) and the body cut
into frames of at most ``frame_max - 8`` octets.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Mapping
from typing import Any

FRAME_METHOD, FRAME_HEADER, FRAME_BODY = 1, 2, 3
FRAME_END = b"\xce"
#: Type, channel and size before a frame's payload, and the end octet after it.
FRAME_OVERHEAD = 8
BASIC_CLASS = 60
BASIC_PUBLISH = 40

#: Property flags, in the order the properties follow the flags (highest bit first).
CONTENT_TYPE = 1 << 15
CONTENT_ENCODING = 1 << 14
HEADERS = 1 << 13
DELIVERY_MODE = 1 << 12
MESSAGE_ID = 1 << 7
PROPERTY_FLAGS = CONTENT_TYPE | CONTENT_ENCODING | HEADERS | DELIVERY_MODE | MESSAGE_ID

#: Method frames kept for reuse. A routing key may embed an aggregate id, so the set of
#: keys is not bounded; past this many the cache starts over.
METHOD_CACHE_SIZE = 1024

PERSISTENT = 2
MANDATORY = 1  # first bit of the publish method's bit octet; "immediate" stays 0

_frame_head = struct.Struct(">BHI")
_content_head = struct.Struct(">HHQH")
_method_head = struct.Struct(">HHH")


class EncodingError(ValueError):
    """This message cannot be put into AMQP frames."""


def shortstr(value: str, field: str) -> bytes:
    encoded = value.encode("utf-8")
    if len(encoded) > 255:
        raise EncodingError(f"{field} is longer than 255 bytes: {value[:60]!r}...")
    return bytes((len(encoded),)) + encoded


class PublishFrames:
    """Encodes persistent, mandatory ``basic.publish`` messages for one channel."""

    def __init__(self, channel_id: int, frame_max: int, exchange: str,
                 content_type: str, content_encoding: str) -> None:
        self.channel_id = channel_id
        self.body_chunk = frame_max - FRAME_OVERHEAD
        self.exchange = shortstr(exchange, "exchange")
        self.content_properties = (shortstr(content_type, "content type")
                                   + shortstr(content_encoding, "content encoding"))
        self._methods: dict[str, bytes] = {}
        # Looked up here, not at import: py-amqp comes with kombu's amqp transport only.
        self._encode_table = importlib.import_module("amqp.serialization").dumps

    def frame(self, kind: int, payload: bytes) -> bytes:
        return _frame_head.pack(kind, self.channel_id, len(payload)) + payload + FRAME_END

    def method(self, routing_key: str) -> bytes:
        """The method frame; one per routing key, made once while the cache holds it."""
        frame = self._methods.get(routing_key)
        if frame is None:
            if len(self._methods) >= METHOD_CACHE_SIZE:
                self._methods.clear()
            frame = self.frame(FRAME_METHOD, (
                _method_head.pack(BASIC_CLASS, BASIC_PUBLISH, 0)  # 0: reserved ticket
                + self.exchange + shortstr(routing_key, "routing key") + bytes((MANDATORY,))
            ))
            self._methods[routing_key] = frame
        return frame

    def message(self, routing_key: str, body: bytes, message_id: str,
                headers: Mapping[str, Any]) -> bytes:
        """Every frame of one message, ready for the socket. Raises
        :class:`EncodingError` when a field cannot be encoded."""
        try:
            table = self._encode_table("F", [headers])
        except Exception as exc:  # py-amqp raises FrameSyntaxError, ValueError, ...
            raise EncodingError(f"headers cannot be encoded for AMQP: {exc!r}") from exc
        try:
            properties = (
                _content_head.pack(BASIC_CLASS, 0, len(body), PROPERTY_FLAGS)
                + self.content_properties + table + bytes((PERSISTENT,))
                + shortstr(message_id, "message_id")
            )
            parts = [self.method(routing_key), self.frame(FRAME_HEADER, properties)]
        except UnicodeEncodeError as exc:
            raise EncodingError(f"cannot be encoded as UTF-8: {exc}") from exc
        parts += [
            self.frame(FRAME_BODY, body[start:start + self.body_chunk])
            for start in range(0, len(body), self.body_chunk)
        ]
        return b"".join(parts)
