"""A kombu consumer process for the inbox tests: reads ``EVENTFERRY_TEST_QUEUE`` on
RabbitMQ with :class:`~eventferry_django.inbox.kombu.InboxCallback` until SIGTERM,
against the test database, tracing to ``EVENTFERRY_TEST_TRACE`` like
``tests/inbox_worker.py``::

    python -m tests.inbox_consumer
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

from kombu import Connection, Consumer, Queue  # noqa: E402

from eventferry_django.inbox.kombu import InboxCallback  # noqa: E402

from .inbox_worker import stopped_by_sigterm  # noqa: E402
from .testapp.models import Shipment  # noqa: E402
from .worker_trace import BROKER_URL, trace  # noqa: E402


def ship(body: dict[str, Any], message: Any) -> None:
    trace("body", task_id=message.properties.get("message_id"), reference=body["reference"])
    Shipment.objects.create(order_reference=body["reference"], handled_by=str(os.getpid()))
    time.sleep(float(body.get("linger", 0)))


callback = InboxCallback("shipping", ship)


def on_message(body: Any, message: Any) -> None:
    message_id = message.properties.get("message_id")
    trace("start", task_id=message_id)
    outcome = callback(body, message)
    trace("end", task_id=message_id, outcome=outcome.value)


def main() -> None:
    stopped = stopped_by_sigterm()
    queue = Queue(os.environ["EVENTFERRY_TEST_QUEUE"], durable=False, auto_delete=False)
    with Connection(BROKER_URL) as connection, Consumer(
        connection, queues=[queue], callbacks=[on_message], accept=["json"],
        prefetch_count=1,
    ):
        trace("ready")
        while not stopped():
            with contextlib.suppress(TimeoutError):
                connection.drain_events(timeout=0.2)


if __name__ == "__main__":
    main()
