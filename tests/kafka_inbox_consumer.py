"""A confluent-kafka consumer process for the inbox tests: reads partition 0 of the topic
``EVENTFERRY_TEST_QUEUE`` on ``EVENTFERRY_KAFKA_SERVERS`` as a member of group
``EVENTFERRY_TEST_GROUP``, with :class:`~eventferry_django.inbox.kafka.InboxHandler`,
until SIGTERM, against the test database, tracing like ``tests/inbox_consumer.py``::

    python -m tests.kafka_inbox_consumer

The partition is assigned, not subscribed to: two such processes both believe they own
it, as a consumer that lost the partition in a rebalance and has not noticed yet does
beside its successor. Each starts from the group's committed offset (the earliest
record when there is none), so both get the same record.
"""

from __future__ import annotations

import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

from confluent_kafka import Consumer, TopicPartition  # noqa: E402

from eventferry_django.inbox.kafka import InboxHandler, record_headers  # noqa: E402

from .inbox_worker import ship_body, stopped_by_sigterm, trace  # noqa: E402


def ship(body: dict[str, Any], record: Any) -> None:
    """The Celery workers' task body: traces, ships, lingers in the transaction."""
    ship_body(record_headers(record)["message_id"], body)


def main() -> None:
    stopped = stopped_by_sigterm()
    consumer = Consumer({
        "bootstrap.servers": os.environ["EVENTFERRY_KAFKA_SERVERS"],
        "group.id": os.environ["EVENTFERRY_TEST_GROUP"],
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    consumer.assign([TopicPartition(os.environ["EVENTFERRY_TEST_QUEUE"], 0)])
    handle = InboxHandler("shipping", ship, consumer)
    trace("ready")
    try:
        while not stopped():
            record = consumer.poll(0.2)
            if record is None or record.error() is not None:
                continue
            message_id = record_headers(record).get("message_id")
            trace("start", task_id=message_id)
            outcome = handle(record)
            trace("end", task_id=message_id, outcome=outcome.value)
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
