"""The kombu publisher's own ``basic.publish`` frames, byte for byte against py-amqp's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from amqp import spec
from amqp.basic_message import Message
from amqp.method_framing import frame_writer
from amqp.serialization import dumps

from eventferry_django.publishers.amqp_frames import (
    METHOD_CACHE_SIZE,
    EncodingError,
    PublishFrames,
)

FRAME_MAX = 4096
CHANNEL = 7


def py_amqp_frames(exchange: str, routing_key: str, body: bytes, message_id: str,
                   headers: dict[str, Any]) -> bytes:
    """What py-amqp's channel.basic_publish(mandatory=True) writes for the same message."""
    written = bytearray()
    transport = SimpleNamespace(write=lambda data: written.extend(data))
    connection = SimpleNamespace(frame_max=FRAME_MAX, bytes_sent=0)
    write_frame = frame_writer(connection, transport)
    message = Message(body, content_type="application/json", content_encoding="utf-8",
                      application_headers=headers, delivery_mode=2, message_id=message_id)
    args = dumps("Bssbb", (0, exchange, routing_key, True, False))
    write_frame(1, CHANNEL, spec.Basic.Publish, args, message)
    return bytes(written)


def ours(exchange: str, routing_key: str, body: bytes, message_id: str,
         headers: dict[str, Any]) -> bytes:
    frames = PublishFrames(CHANNEL, FRAME_MAX, exchange, "application/json", "utf-8")
    return frames.message(routing_key, body, message_id, headers)


HEADERS = {
    "aggregate_type": "order", "aggregate_id": "o-1", "partition_key": "o-1", "attempt": 1,
    "traceparent": "00-abc-def-01", "tenant": "acmé", "big": 2**40, "ratio": 0.5,
    "flag": True, "nothing": None, "tags": ["a", 1, {"x": [False]}], "nested": {"k": "v"},
}


@pytest.mark.parametrize(("body", "headers"), [
    (b'{"order_id": 1}', HEADERS),
    (b"", {}),  # no body frame at all
    (b"x" * (FRAME_MAX - 8), HEADERS),  # exactly one full body frame
    (('{"pad": "' + "é" * 5000 + '"}').encode(), HEADERS),  # cut across three frames
])
def test_frames_match_py_amqp_byte_for_byte(body: bytes, headers: dict[str, Any]) -> None:
    arguments = ("orders", "order.created", body, "6f1c2f2e-message", headers)
    assert ours(*arguments) == py_amqp_frames(*arguments)


def test_a_method_frame_is_reused_per_routing_key() -> None:
    frames = PublishFrames(CHANNEL, FRAME_MAX, "orders", "application/json", "utf-8")
    assert frames.method("a.b") is frames.method("a.b")
    assert frames.method("a.b") != frames.method("a.c")


@pytest.mark.parametrize(("routing_key", "message_id", "headers", "problem"), [
    ("k", "m", {"huge": 2**70}, "headers cannot be encoded for AMQP"),
    ("k", "m" * 256, {}, "message_id is longer than 255 bytes"),
    ("k" * 256, "m", {}, "routing key is longer than 255 bytes"),
    ("k\udc80", "m", {}, "cannot be encoded as UTF-8"),
    ("k", "m\udc80", {}, "cannot be encoded as UTF-8"),
])
def test_what_cannot_be_encoded_is_refused_by_name(
    routing_key: str, message_id: str, headers: dict[str, Any], problem: str,
) -> None:
    frames = PublishFrames(CHANNEL, FRAME_MAX, "orders", "application/json", "utf-8")
    with pytest.raises(EncodingError, match=problem):
        frames.message(routing_key, b"{}", message_id, headers)


def test_the_method_frame_cache_stays_bounded_with_per_aggregate_keys() -> None:
    frames = PublishFrames(CHANNEL, FRAME_MAX, "orders", "application/json", "utf-8")
    for n in range(3 * METHOD_CACHE_SIZE):
        frames.method(f"order.{n}")
    assert len(frames._methods) <= METHOD_CACHE_SIZE
    assert frames.method("order.0") == frames.method("order.0")
