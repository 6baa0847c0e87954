"""RabbitMQ through py-amqp: a whole batch pipelined, its publisher confirms read once.

All messages of a batch go out in one write, as frames laid out by
:mod:`~eventferry_django.publishers.amqp_frames`, and the broker's acks are collected
once for the batch, so a batch of 500 costs one round trip, not 500. kombu's own
``confirm_publish`` transport option waits for each message in turn, which is exactly
the per-message round trip this module avoids.

:class:`~eventferry_django.publishers.kombu.KombuPublisher` chooses this publisher for
``amqp://``/``amqps://`` URLs (kombu's py-amqp transport); its docstring states the
behaviour users rely on.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

from .amqp_frames import EncodingError, PublishFrames
from .base import OutboundMessage, Outcome, Publisher, PublishResult
from .kombu_link import (
    CONTENT_ENCODING,
    KombuLink,
    KombuSettings,
    Unsendable,
    body_of,
    routing_key_for,
)


class ConfirmBatch:
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

    def outcome(self) -> list[PublishResult]:
        """One result per message, once nothing is pending."""
        return [r if r is not None else PublishResult.ok() for r in self.results]


class AmqpConfirmPublisher(Publisher):
    """Publishes batches to RabbitMQ with pipelined publisher confirms (py-amqp only).

    Built by :class:`~eventferry_django.publishers.kombu.KombuPublisher` from its
    validated OPTIONS; outcomes, timeouts and ordering are as its docstring says.
    """

    def __init__(self, settings: KombuSettings) -> None:
        super().__init__()
        self.settings = settings
        self.link = KombuLink(settings, self._on_open)
        self._frames: PublishFrames | None = None
        self._delivery_tag = 0
        self._batch: ConfirmBatch | None = None

    def describe(self) -> str:
        return f"{type(self).__name__} {self.settings.describe()}"

    def _on_open(self, connection: Any, channel: Any) -> None:
        """Confirm mode and the ack, nack and return handlers on a fresh channel."""
        self._frames = PublishFrames(channel.channel_id, connection.connection.frame_max,
                                     self.settings.exchange,
                                     self.settings.message_format.content_type,
                                     CONTENT_ENCODING)
        self._delivery_tag = 0  # a new channel numbers its deliveries from 1 again
        channel.confirm_select()
        channel.events["basic_ack"].add(self._on_ack)
        channel.events["basic_nack"].add(self._on_nack)
        channel.events["basic_return"].add(self._on_return)

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        if not messages:
            return []
        return self.link.run(lambda connection, _: self._publish(connection, messages))

    def close(self) -> None:
        self.link.close()

    def _publish(self, connection: Any, messages: Sequence[OutboundMessage]
                 ) -> list[PublishResult]:
        """Write the whole batch in one ``sendall``, then read confirms until all are in
        or time runs out."""
        settings = self.settings
        deadline = time.monotonic() + settings.publish_timeout
        batch = self._batch = ConfirmBatch(len(messages), settings.exchange)
        try:
            wire = self._encode(messages, batch)
            amqp_connection = connection.connection
            if wire:
                transport = amqp_connection.transport
                with transport.having_timeout(settings.publish_timeout):
                    transport.write(wire)
            while batch.pending:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{len(batch.pending)} of {len(messages)} messages "
                                       "not confirmed")
                amqp_connection.drain_events(timeout=remaining)
            return batch.outcome()
        finally:
            self._batch = None

    def _encode(self, messages: Sequence[OutboundMessage], batch: ConfirmBatch) -> bytearray:
        """The frames of the batch's sendable messages, each numbered in ``batch`` with
        its delivery tag; the others get ``GIVE_UP`` there."""
        assert self._frames is not None  # set by _on_open
        settings = self.settings
        wire = bytearray()
        for index, message in enumerate(messages):
            envelope = settings.message_format.envelope(message)
            try:
                wire += self._frames.message(
                    routing_key_for(settings, message), body_of(settings, envelope),
                    message.message_id, envelope.headers,
                )
            except (Unsendable, EncodingError) as exc:
                batch.results[index] = PublishResult(Outcome.GIVE_UP, str(exc))
                continue
            self._delivery_tag += 1
            batch.sent(self._delivery_tag, index, message.message_id)
        return wire

    def _on_ack(self, delivery_tag: int, multiple: bool) -> None:
        if self._batch is not None:
            self._batch.settle(delivery_tag, multiple, nacked=False)

    def _on_nack(self, delivery_tag: int, multiple: bool) -> None:
        if self._batch is not None:
            self._batch.settle(delivery_tag, multiple, nacked=True)

    def _on_return(self, exc: Exception, exchange: str, routing_key: str, message: Any) -> None:
        if self._batch is not None:
            self._batch.returned(message.properties.get("message_id"), routing_key, str(exc))

