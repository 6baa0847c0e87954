"""Encoding ``basic.publish`` frames: our ``amqp_frames`` against pamqp and py-amqp.

    python benchmarks/amqp_frames.py [--messages 10000] [--repeat 5]

Each candidate turns the same messages (a ~200-byte JSON body, the relay's reserved
headers plus one event header, a message id) into the bytes of a method frame, a content
header frame and a body frame, as the RabbitMQ confirm pipeline writes them. Two kinds of
routing key: one topic for every message (the method frame cache of ``amqp_frames``
helps), and one key per aggregate (it cannot). No broker is needed. pamqp is optional
(``pip install pamqp``); without it its rows are skipped.

It also says whether each candidate's bytes equal py-amqp's: the header table is what a
consumer decodes, so a candidate that types a header differently changes what consumers
see.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eventferry_django.publishers.amqp_frames import PublishFrames

FRAME_MAX = 131072
CHANNEL = 1
EXCHANGE = "orders"
CONTENT_TYPE, CONTENT_ENCODING = "application/json", "utf-8"

Message = tuple[str, bytes, str, dict[str, Any]]  # routing key, body, message id, headers
Encoder = Callable[[Message], bytes]


def make_messages(count: int, per_aggregate: bool) -> list[Message]:
    return [
        (
            f"order.{n}.created" if per_aggregate else "order.created",
            f'{{"order": {n}, "customer": "c-42", "note": "{"x" * 150}"}}'.encode(),
            str(uuid.uuid4()),
            {"tenant": "acme", "aggregate_type": "order", "aggregate_id": str(n),
             "partition_key": str(n), "attempt": 1},
        )
        for n in range(count)
    ]


def ours() -> Encoder:
    frames = PublishFrames(CHANNEL, FRAME_MAX, EXCHANGE, CONTENT_TYPE, CONTENT_ENCODING)
    return lambda m: frames.message(*m)


def pamqp_encoder() -> Encoder:
    from pamqp import body, commands, frame, header

    def encode(m: Message) -> bytes:
        routing_key, payload, message_id, headers = m
        properties = commands.Basic.Properties(
            content_type=CONTENT_TYPE, content_encoding=CONTENT_ENCODING, headers=headers,
            delivery_mode=2, message_id=message_id,
        )
        parts = [
            frame.marshal(commands.Basic.Publish(
                exchange=EXCHANGE, routing_key=routing_key, mandatory=True), CHANNEL),
            frame.marshal(header.ContentHeader(0, len(payload), properties), CHANNEL),
        ]
        chunk = FRAME_MAX - 8
        parts += [frame.marshal(body.ContentBody(payload[i:i + chunk]), CHANNEL)
                  for i in range(0, len(payload), chunk)]
        return b"".join(parts)

    return encode


def py_amqp() -> Encoder:
    """What ``channel.basic_publish`` does before the socket: py-amqp's own frame writer."""
    from amqp import spec
    from amqp.basic_message import Message as AmqpMessage
    from amqp.method_framing import frame_writer
    from amqp.serialization import dumps

    written = bytearray()
    transport = SimpleNamespace(write=written.extend)
    write_frame = frame_writer(SimpleNamespace(frame_max=FRAME_MAX, bytes_sent=0), transport)

    def encode(m: Message) -> bytes:
        routing_key, payload, message_id, headers = m
        message = AmqpMessage(payload, content_type=CONTENT_TYPE,
                              content_encoding=CONTENT_ENCODING, application_headers=headers,
                              delivery_mode=2, message_id=message_id)
        args = dumps("Bssbb", (0, EXCHANGE, routing_key, True, False))
        write_frame(1, CHANNEL, spec.Basic.Publish, args, message)
        data = bytes(written)
        written.clear()
        return data

    return encode


def rate(encoder: Encoder, messages: list[Message], repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        for m in messages:
            encoder(m)
        timings.append(time.perf_counter() - started)
    return len(messages) / statistics.median(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5, help="runs; the median counts")
    args = parser.parse_args()
    candidates: list[tuple[str, Callable[[], Encoder]]] = [
        ("amqp_frames (ours)", ours), ("pamqp", pamqp_encoder), ("py-amqp", py_amqp),
    ]
    print(f"{args.messages:,} messages (method + header + body frames), median of "
          f"{args.repeat}\n")
    print(f"{'encoder':<20} {'routing keys':<14} {'msgs/s':>10}  bytes == py-amqp")
    for per_aggregate in (False, True):
        messages = make_messages(args.messages, per_aggregate)
        reference = py_amqp()
        expected = [reference(m) for m in messages[:100]]
        for label, factory in candidates:
            try:
                encoder = factory()
            except ImportError as exc:
                print(f"{label:<20} skipped: {exc}")
                continue
            same = [encoder(m) for m in messages[:100]] == expected
            keys = "one per aggr." if per_aggregate else "one topic"
            print(f"{label:<20} {keys:<14} {rate(encoder, messages, args.repeat):>10,.0f}  "
                  f"{same}")


if __name__ == "__main__":
    main()
