"""The raw limit: how fast one warm process can drain the outbox table with no guarantees.

Issue 18's ceiling for the relay, run on the very rows the relay drains (the outbox
table, seeded the same way), so both pay the same table and indexes::

    BEGIN;
    SELECT id, payload FROM <outbox> WHERE status = <pending>
        ORDER BY id LIMIT 500 FOR UPDATE SKIP LOCKED;
    -- publish the 500 payloads persistent, wait for the broker's confirms once
    UPDATE <outbox> SET status = <done>, processed_at = <now> WHERE id = ANY(...);
    COMMIT;

until the SELECT comes back empty. It keeps no order and handles no failure.

:func:`drain_outbox` is the same loop without a transaction held across the publish: a
read that locks and writes nothing, then the ack, the store contract's one write per
event. It is the floor of this relay, which owns what it reads by bucket lease rather
than by an open transaction (PostgreSQL only). PostgreSQL runs the loops through
psycopg 3 with ``synchronous_commit`` off, MariaDB through PyMySQL (the
benchmarks' driver) under the server's own flush setting; pika publishes to RabbitMQ
(:class:`BatchConfirmer`), or redis-py ``LPUSH`` es the payloads to Redis in one
non-transactional pipeline a batch (:class:`RedisPipeliner`, Redis's counterpart: it
has no confirms, and a pipeline that runs is a batch stored), or confluent-kafka
produces them to Kafka keyed by aggregate (the loop then selects ``aggregate_id`` too)
with an idempotent ``acks=all`` producer, flushed once a batch (:class:`KafkaProducer`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Protocol

import pika

from eventferry_django.models import Status

BATCH = 500


@dataclass(frozen=True)
class DrainTime:
    """One drain: its events, seconds end to end, and seconds after its first progress
    (the first batch done) for the events after that batch."""

    events: int
    seconds: float
    steady_events: int
    steady_seconds: float

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    @property
    def steady_rate(self) -> float:
        return self.steady_events / self.steady_seconds


class BatchConfirmer:
    """pika with confirms awaited once per batch (its blocking API waits per message)."""

    def __init__(self, amqp_url: str, exchange: str) -> None:
        # kombu writes the default vhost as "//"; pika wants it percent-encoded.
        url = amqp_url[:-2] + "/%2F" if amqp_url.endswith("//") else amqp_url
        self.exchange = exchange
        self.connection = pika.BlockingConnection(pika.URLParameters(url))
        self.channel = self.connection.channel()
        self.channel.exchange_declare(exchange, "topic", durable=True)
        self.impl = self.channel._impl
        self.confirmed = 0
        self.sent = 0
        self.impl.confirm_delivery(self._on_confirm)
        self.connection.process_data_events(time_limit=0.5)

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        assert type(method).__name__ == "Ack", f"broker refused: {method}"
        self.confirmed = method.delivery_tag if method.multiple else max(
            self.confirmed, method.delivery_tag)

    def publish(self, bodies: list[bytes]) -> None:
        properties = pika.BasicProperties(delivery_mode=2, content_type="application/json")
        for body in bodies:
            self.impl.basic_publish(self.exchange, "orders.created", body, properties)
            self.sent += 1
        while self.confirmed < self.sent:
            self.connection.process_data_events(time_limit=0.01)

    def close(self) -> None:
        self.connection.close()


class RedisPipeliner:
    """redis-py: each batch's payloads ``LPUSH`` ed to one list in one pipeline."""

    def __init__(self, redis_url: str, queue: str) -> None:
        import redis

        self.client = redis.Redis.from_url(redis_url)
        self.queue = queue

    def publish(self, bodies: list[bytes]) -> None:
        with self.client.pipeline(transaction=False) as pipeline:
            for body in bodies:
                pipeline.lpush(self.queue, body)
            pipeline.execute()

    def close(self) -> None:
        self.client.close()


class KafkaProducer:
    """confluent-kafka's idempotent producer (``acks=all``): each batch's payloads
    produced keyed by aggregate, then flushed once; every delivery report checked."""

    def __init__(self, servers: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True,
                                  "acks": "all"})
        self.topic = topic
        self.failed: list[Any] = []

    def _report(self, error: Any, record: Any) -> None:
        if error is not None:
            self.failed.append(error)

    def publish(self, bodies: list[bytes], keys: list[bytes] | None = None) -> None:
        assert keys is not None, "the Kafka loop is keyed by aggregate"
        for key, body in zip(keys, bodies, strict=True):
            self.producer.produce(self.topic, value=body, key=key, on_delivery=self._report)
        assert self.producer.flush(30) == 0, "delivery reports did not all come"
        assert not self.failed, f"broker refused: {self.failed[0]}"

    def close(self) -> None:
        self.producer.flush(30)


class Sink(Protocol):
    """Where the raw loop sends a batch, and returns once the broker has it."""

    def publish(self, bodies: list[bytes]) -> None: ...


class DrainClock:
    """Times a drain: call :meth:`done` after each batch, :meth:`result` at the end."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.drained = 0
        self.first_done: tuple[float, int] | None = None

    def done(self, rows: int) -> None:
        self.drained += rows
        if self.first_done is None:
            self.first_done = (time.perf_counter(), self.drained)

    def result(self) -> DrainTime:
        finished = time.perf_counter()
        assert self.first_done is not None, "nothing to drain"
        at, first = self.first_done
        return DrainTime(self.drained, finished - self.started, self.drained - first,
                         finished - at)


def _publish(confirmer: Sink | KafkaProducer, rows: list[tuple[Any, ...]]) -> None:
    """Send the batch ``(id, [aggregate_id,] payload)``: keyed by aggregate to Kafka."""
    if isinstance(confirmer, KafkaProducer):
        confirmer.publish([str(row[2]).encode() for row in rows],
                          [str(row[1]).encode() for row in rows])
    else:
        confirmer.publish([str(row[-1]).encode() for row in rows])


def drain(connection: Any, table: str, vendor: str, confirmer: Sink | KafkaProducer
          ) -> DrainTime:
    """Drain ``table`` through ``connection`` (psycopg 3 in autocommit, or PyMySQL) with
    the loop above; :class:`KafkaProducer` gets each row's aggregate id as its key."""
    postgresql = vendor == "postgresql"
    if postgresql:
        connection.execute("SET synchronous_commit = off")
    else:
        connection.autocommit(False)
    payload = "payload::text" if postgresql else "payload"
    key = "aggregate_id, " if isinstance(confirmer, KafkaProducer) else ""
    select = (f"SELECT id, {key}{payload} FROM {table} WHERE status = {Status.PENDING} "
              f"ORDER BY id LIMIT {BATCH} FOR UPDATE SKIP LOCKED")
    now = "statement_timestamp()" if postgresql else "UTC_TIMESTAMP(3)"
    update = f"UPDATE {table} SET status = {Status.DONE}, processed_at = {now} WHERE "
    clock = DrainClock()
    while True:
        cursor = connection.cursor()
        if postgresql:
            cursor.execute("BEGIN")
        cursor.execute(select)
        rows = cursor.fetchall()
        if rows:
            _publish(confirmer, rows)
            ids = [row[0] for row in rows]
            if postgresql:
                cursor.execute(update + "id = ANY(%s)", [ids])
            else:
                cursor.execute(update + f"id IN ({', '.join(['%s'] * len(ids))})", ids)
        if postgresql:
            cursor.execute("COMMIT")
        else:
            connection.commit()
        if not rows:
            break
        clock.done(len(rows))
    return clock.result()


def drain_outbox(connection: Any, table: str, confirmer: Sink | KafkaProducer) -> DrainTime:
    """Drain ``table`` (the outbox table, on PostgreSQL, through psycopg 3 in autocommit)
    reading each batch without writing, as the store contract's claim does, and paying
    its one write per event, with none of the relay's ordering or failure handling::

        SELECT id, payload FROM <outbox> WHERE status = <pending> AND id > <last>
            ORDER BY id LIMIT 500;
        -- publish, wait for the broker once
        UPDATE <outbox> SET status = <done>, processed_at = <now> WHERE id = ANY(...);
    """
    connection.execute("SET synchronous_commit = off")
    key = "aggregate_id, " if isinstance(confirmer, KafkaProducer) else ""
    read = (f"SELECT id, {key}payload::text FROM {table} WHERE status = {Status.PENDING} "
            f"AND id > %s ORDER BY id LIMIT {BATCH}")
    ack = (f"UPDATE {table} SET status = {Status.DONE}, processed_at = statement_timestamp() "
           "WHERE id = ANY(%s)")
    clock = DrainClock()
    last = 0
    while rows := connection.execute(read, [last]).fetchall():
        _publish(confirmer, rows)
        connection.execute(ack, [[row[0] for row in rows]])
        last = rows[-1][0]
        clock.done(len(rows))
    return clock.result()
