"""kombu's Redis transport (``redis://``, ``rediss://``) at pipeline speed.

kombu's Producer costs two Redis round trips per message on this transport: its virtual
exchange reads the exchange's binding table (``SMEMBERS``) to route every message, then
pushes it (``LPUSH``). :class:`KombuRedisPublisher` writes exactly what kombu's Producer
would write, but per batch: it reads the binding table once, routes each distinct
routing key locally with the exchange type's own ``lookup`` (the same code kombu routes
with), and sends one ``LPUSH`` per list, carrying that list's messages in publish order
(and the ``PEXPIRE`` s kombu would send), through one non-transactional pipeline,
executed once. A batch is then one round trip for the table and one for the messages,
whatever its size.

What is still done per message, in Python: the envelope, kombu's message dict (body
base64-encoded, a fresh ``delivery_tag``) and its JSON. Fanout exchanges are not served
here: on Redis they are pub/sub, and
:class:`~eventferry_django.publishers.kombu.KombuPublisher` keeps kombu's own Producer
(:class:`~eventferry_django.publishers.kombu_producer.KombuProducerPublisher`) for them.

Outcomes, ordering and timeouts are as
:class:`~eventferry_django.publishers.kombu.KombuPublisher`'s docstring says: kombu
consumers ``BRPOP`` from the other end of each list, so the order of the ``LPUSH`` es,
which is the batch's, is each queue's.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from typing import Any

from .base import OutboundMessage, Outcome, Publisher, PublishResult
from .kombu_link import (
    CONTENT_ENCODING,
    KombuLink,
    KombuSettings,
    Prepared,
    Unsendable,
    prepare,
    unroutable,
)

PERSISTENT = 2


class RedisWire:
    """kombu's Redis channel, as far as writing its messages takes: every kombu internal
    this module relies on is named here, and ``tests/test_kombu_redis.py`` compares what
    it writes with what kombu's own ``Producer.publish`` writes, so a kombu release that
    changes the stored format fails a test instead of a consumer.

    Public channel API: ``prepare_message`` (the message dict), ``get_table`` and
    ``typeof(...).lookup`` (routing), ``conn_or_acquire`` (a client on the channel's
    pool, with its ``global_keyprefix``). Internals, for lack of a public way to the
    same result: ``_inplace_augment_message`` (what ``basic_publish`` adds: the body
    encoded with the channel's ``body_encoding``, ``delivery_tag``, ``delivery_info``),
    ``_get_message_priority`` and ``_q_for_pri`` (the list a priority goes to), and
    ``_expires`` (the queues this channel knows an ``x-expires`` for, which ``_put``
    renews on every push).
    """

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self.dumps = importlib.import_module("kombu.utils.json").dumps

    def queues(self, exchange: str, routing_keys: Iterable[str]) -> dict[str, list[str]]:
        """The queues each routing key reaches, from one read of the binding table.

        As kombu's ``basic_publish`` routes: the default exchange (``""``) sends to the
        queue the key names; others ask their exchange type's ``lookup`` (a topic
        exchange also drops the channel's dead-letter queue, as its ``deliver`` does).
        """
        if not exchange:
            return {key: [key] for key in routing_keys}
        channel = self.channel
        table = channel.get_table(exchange)  # one SMEMBERS
        exchange_type = channel.typeof(exchange)
        skip = channel.deadletter_queue if exchange_type.type == "topic" else None
        return {
            key: sorted(q for q in exchange_type.lookup(table, exchange, key, None)
                        if q and q != skip)
            for key in routing_keys
        }

    def message(self, exchange: str, prepared: Prepared, message_id: str) -> dict[str, Any]:
        """The dict kombu's ``Producer.publish`` then ``basic_publish`` would store."""
        envelope = prepared.envelope
        stored: dict[str, Any] = self.channel.prepare_message(
            prepared.body, 0, envelope.content_type, CONTENT_ENCODING, envelope.headers,
            # Producer.publish's order: message_id (a keyword), then delivery_mode.
            {"message_id": message_id, "delivery_mode": PERSISTENT},
        )
        self.channel._inplace_augment_message(stored, exchange, prepared.routing_key)
        return stored

    def add(self, pushes: dict[str, list[str]], queues: Sequence[str],
            stored: dict[str, Any], encoded: str) -> None:
        """Note ``encoded`` (``stored`` as JSON) for the list of each of ``queues`` that
        ``_put`` would push it to (by its priority)."""
        channel = self.channel
        priority = channel._get_message_priority(stored, reverse=False)
        for queue in queues:
            pushes.setdefault(channel._q_for_pri(queue, priority), []).append(encoded)

    def write(self, pipeline: Any, pushes: dict[str, list[str]], queues: Iterable[str]
              ) -> None:
        """One ``LPUSH`` per list, its values in publish order (``LPUSH k a b`` leaves
        ``a`` to be popped first from the right, as two ``LPUSH`` es would), then the
        ``PEXPIRE`` s ``_put`` sends for ``queues`` with an ``x-expires``."""
        for key, values in pushes.items():
            pipeline.lpush(key, *values)
        channel = self.channel
        expires: dict[str, int] = getattr(channel, "_expires", None) or {}
        for queue in queues:
            if queue in expires:
                for step in channel.priority_steps:
                    pipeline.pexpire(channel._q_for_pri(queue, step), expires[queue])


class KombuRedisPublisher(Publisher):
    """Publishes each batch to Redis in one pipeline, in kombu's own message format.

    Built by :class:`~eventferry_django.publishers.kombu.KombuPublisher` for ``redis://``
    and ``rediss://`` URLs with a direct or topic exchange; outcomes, timeouts and
    ordering are as its docstring says.
    """

    def __init__(self, settings: KombuSettings) -> None:
        super().__init__()
        self.settings = settings
        self.link = KombuLink(settings, lambda connection, channel: None)

    def describe(self) -> str:
        return f"{type(self).__name__} {self.settings.describe()}"

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        if not messages:
            return []
        return self.link.run(lambda _, channel: self._publish(RedisWire(channel), messages))

    def close(self) -> None:
        self.link.close()

    def _publish(self, wire: RedisWire, messages: Sequence[OutboundMessage]
                 ) -> list[PublishResult]:
        """Route and encode the batch, then send it in one pipeline; without confirms,
        a pipeline that runs without an error means every message in it is delivered."""
        settings = self.settings
        prepared: list[Prepared | PublishResult] = []
        for message in messages:
            try:
                prepared.append(prepare(settings, message))
            except Unsendable as exc:
                prepared.append(PublishResult(Outcome.GIVE_UP, str(exc)))
        routes = wire.queues(
            settings.exchange, {p.routing_key for p in prepared if isinstance(p, Prepared)},
        )
        pushes: dict[str, list[str]] = {}
        results = [
            p if isinstance(p, PublishResult)
            else self._encode(wire, pushes, routes, p, message.message_id)
            for p, message in zip(prepared, messages, strict=True)
        ]
        if pushes:
            # Every routed queue: only one whose messages all failed to encode gets a
            # PEXPIRE it would not have, which only renews its lifetime.
            reached = {queue for queues in routes.values() for queue in queues}
            with wire.channel.conn_or_acquire() as client, client.pipeline(
                transaction=False,
            ) as pipeline:
                wire.write(pipeline, pushes, reached)
                pipeline.execute()  # the batch's one round trip
        return results

    def _encode(self, wire: RedisWire, pushes: dict[str, list[str]],
                routes: dict[str, list[str]], prepared: Prepared, message_id: str
                ) -> PublishResult:
        """Add one message to ``pushes``; its result once they are written."""
        queues = routes[prepared.routing_key]
        if not queues:
            return PublishResult(Outcome.RETRY, unroutable(self.settings, prepared.routing_key))
        stored = wire.message(self.settings.exchange, prepared, message_id)
        try:
            encoded = wire.dumps(stored)
        except (TypeError, ValueError) as exc:
            return PublishResult(Outcome.GIVE_UP, f"message cannot be encoded as JSON: {exc}")
        wire.add(pushes, queues, stored, encoded)
        return PublishResult.ok()
