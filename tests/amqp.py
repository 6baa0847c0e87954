"""RabbitMQ helpers for tests that run relays against the real broker.

::

    with TopicQueue(AMQP_URL) as queue:      # unique durable topic exchange + queue, '#'
        ...relays publish to queue.exchange...
        received = queue.drain()             # every message now in the queue, in order
    # exchange and queue are deleted on exit

Messages are read with a ``no_ack`` consumer (the broker pushes them with a large
prefetch), not one ``basic.get`` round trip each, so draining 20,000 takes a moment.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import kombu
import pytest

from .tcp_proxy import TcpProxy

AMQP_URL = os.environ.get("EVENTFERRY_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")


def require_broker(url: str = AMQP_URL) -> str:
    """``url`` when RabbitMQ answers there; otherwise fail (not skip) saying so."""
    connection = kombu.Connection(url, connect_timeout=2)
    try:
        connection.ensure_connection(max_retries=0)
    except Exception as exc:
        pytest.fail(f"{connection.as_uri()} is unreachable ({exc!r}); run `make services`.")
    finally:
        connection.release()
    return url


def unique_name(prefix: str = "eventferry-relay-test") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def proxy_for(url: str = AMQP_URL) -> TcpProxy:
    """A (not yet started) :class:`TcpProxy` in front of the broker of ``url``."""
    parts = kombu.Connection(url)
    return TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5672)


def proxied_url(url: str, proxy: TcpProxy) -> str:
    """``url`` rewritten to reach the broker through ``proxy`` (which must be started)."""
    parts = kombu.Connection(url)
    vhost = parts.virtual_host if parts.virtual_host != "/" else ""
    return f"amqp://{parts.userid}:{parts.password}@127.0.0.1:{proxy.port}/{vhost}"


@dataclass(frozen=True)
class Received:
    """One message as it came off the queue."""

    message_id: str
    exchange: str
    routing_key: str
    headers: dict[str, Any]
    body: bytes

    @property
    def payload(self) -> Any:
        return json.loads(self.body)


class TopicQueue:
    """A durable topic exchange and a durable queue bound to it with ``binding``.

    The exchange is declared exactly as :class:`KombuPublisher` declares it (durable
    topic, not auto-delete), so a relay's own declaration agrees with this one.
    :meth:`delete` removes both: a durable exchange would outlive the test.
    """

    def __init__(self, url: str = AMQP_URL, name: str | None = None,
                 binding: str = "#") -> None:
        self.url = url
        self.exchange = name or unique_name()
        self.queue = f"{self.exchange}-q"
        self.binding = binding
        self.exchanges = [self.exchange]
        self.connection = kombu.Connection(url, connect_timeout=5)
        self.channel: Any = self.connection.channel()  # a py-amqp channel
        self.channel.auto_decode = False  # keep bodies as the bytes received
        self.channel.exchange_declare(self.exchange, "topic", durable=True, auto_delete=False)
        self.channel.queue_declare(self.queue, durable=True, auto_delete=False)
        self.channel.queue_bind(self.queue, self.exchange, routing_key=binding)

    def bind_exchange(self, name: str | None = None) -> str:
        """Declare one more exchange (deleted with the queue) bound to this queue with the
        same key: publishers given different exchanges fill one queue, and each message's
        exchange tells which publisher sent it."""
        name = name or unique_name()
        self.channel.exchange_declare(name, "topic", durable=True, auto_delete=False)
        self.exchanges.append(name)
        self.channel.queue_bind(self.queue, name, routing_key=self.binding)
        return name

    def message_count(self) -> int:
        """Messages ready in the queue (asked with a passive declare)."""
        _, count, _ = self.channel.queue_declare(self.queue, passive=True)
        return int(count)

    def drain(self, timeout: float = 60.0) -> list[Received]:
        """Consume every message the queue holds now, in queue order, and check it is
        then empty. Call it once the publishers are done: a publisher confirm means the
        message is in the queue, so the count asked first is the whole of it."""
        expected = self.message_count()
        received: list[Received] = []

        def on_message(message: Any) -> None:
            received.append(Received(
                message_id=message.properties.get("message_id", ""),
                exchange=message.delivery_info["exchange"],
                routing_key=message.delivery_info["routing_key"],
                headers=dict(message.properties.get("application_headers") or {}),
                body=message.body if isinstance(message.body, bytes)
                else message.body.encode("utf-8"),
            ))

        self.channel.basic_qos(0, 2000, False)
        tag = self.channel.basic_consume(self.queue, no_ack=True, callback=on_message)
        deadline = time.monotonic() + timeout
        try:
            while len(received) < expected:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"only {len(received)} of {expected} messages arrived from "
                        f"{self.queue} within {timeout}s"
                    )
                self.connection.drain_events(timeout=left)
        finally:
            self.channel.basic_cancel(tag)
        assert self.channel.basic_get(self.queue, no_ack=True) is None, (
            f"{self.queue} held more than the {expected} messages it reported"
        )
        return received

    def delete(self) -> None:
        try:
            self.channel.queue_delete(self.queue)
            for exchange in self.exchanges:
                self.channel.exchange_delete(exchange)
        finally:
            self.connection.release()

    def __enter__(self) -> TopicQueue:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.delete()
