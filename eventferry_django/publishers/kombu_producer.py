"""kombu's virtual transports (``redis://``, ``memory://``, ...) through a kombu Producer.

These transports have no publisher confirms: a message counts as delivered once kombu
hands it over without raising. They also drop a message no binding matches without a
word, so each routing key is looked up in the binding table first and an unroutable
message answers ``RETRY``, as on RabbitMQ.

:class:`~eventferry_django.publishers.kombu.KombuPublisher` chooses this publisher for
every transport but py-amqp's; its docstring states the behaviour users rely on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import OutboundMessage, Outcome, Publisher, PublishResult
from .kombu_link import (
    CONTENT_ENCODING,
    KombuLink,
    KombuSettings,
    Unsendable,
    exchange_of,
    kombu,
    prepare,
    unroutable,
)

PERSISTENT = 2


class KombuProducerPublisher(Publisher):
    """Publishes each message through a kombu Producer, without confirms.

    Built by :class:`~eventferry_django.publishers.kombu.KombuPublisher` from its
    validated OPTIONS; outcomes, timeouts and ordering are as its docstring says.
    """

    def __init__(self, settings: KombuSettings) -> None:
        super().__init__()
        self.settings = settings
        self.link = KombuLink(settings, self._on_open)
        self._producer: Any = None  # kombu.Producer of the link's channel

    def describe(self) -> str:
        return f"{type(self).__name__} {self.settings.describe()}"

    def _on_open(self, connection: Any, channel: Any) -> None:
        self._producer = kombu().Producer(
            channel, exchange=exchange_of(self.settings), auto_declare=False,
        )

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        if not messages:
            return []
        return self.link.run(lambda _, channel: self._publish(channel, messages))

    def close(self) -> None:
        self.link.close()

    def _publish(self, channel: Any, messages: Sequence[OutboundMessage]
                 ) -> list[PublishResult]:
        """Hand each message to kombu; without confirms, no exception means delivered."""
        settings = self.settings
        routable: dict[str, bool] = {}
        results = []
        for message in messages:
            try:
                prepared = prepare(settings, message)
            except Unsendable as exc:
                results.append(PublishResult(Outcome.GIVE_UP, str(exc)))
                continue
            routing_key, envelope = prepared.routing_key, prepared.envelope
            if routing_key not in routable:
                routable[routing_key] = self._has_route(channel, routing_key)
            if not routable[routing_key]:
                results.append(PublishResult(Outcome.RETRY, unroutable(settings, routing_key)))
                continue
            self._producer.publish(
                prepared.body,
                routing_key=routing_key,
                content_type=envelope.content_type,
                content_encoding=CONTENT_ENCODING,
                headers=envelope.headers,
                delivery_mode=PERSISTENT,
                message_id=message.message_id,
                retry=False,
                timeout=settings.publish_timeout,
            )
            results.append(PublishResult.ok())
        return results

    def _has_route(self, channel: Any, routing_key: str) -> bool:
        """Whether a virtual transport would route ``routing_key`` to any queue.

        kombu's virtual transports drop a message no binding matches without a word; this
        asks the binding table (one Redis round trip per distinct key and batch).
        """
        exchange = self.settings.exchange
        if not exchange:  # the default exchange routes to the queue named by the key
            return True
        try:
            table = channel.get_table(exchange)
            queues = channel.typeof(exchange).lookup(table, exchange, routing_key, None)
        except KeyError:
            return False
        return bool(queues)
