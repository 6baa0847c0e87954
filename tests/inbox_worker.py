"""The Celery app of the inbox tests' worker processes: ``celery -A tests.inbox_worker
worker``, against the test database (``EVENTFERRY_TEST_DB_NAME``) and a queue of the
test's own (``EVENTFERRY_TEST_QUEUE``) on RabbitMQ.

Each worker appends what it does to ``EVENTFERRY_TEST_TRACE`` as JSON lines (ready,
task start, body, task end, with pid and time), so a test can tell which process ran
what, and when.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

from eventferry_django.inbox.celery import InboxTask  # noqa: E402

from .testapp.models import Shipment  # noqa: E402
from .worker_trace import trace, trace_celery_worker, worker_app  # noqa: E402

# One message at a time per worker, acked after the task: the second delivery of a
# message goes to the other worker while the first is still running.
app = worker_app("eventferry-inbox-tests", task_acks_late=True)


def stopped_by_sigterm() -> Callable[[], bool]:
    """From now on, whether SIGTERM has come: a consumer process's loop condition."""
    received = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: received.set())
    return received.is_set


def ship_body(task_id: str, event: dict[str, Any]) -> None:
    trace("body", task_id=task_id, reference=event["reference"])
    Shipment.objects.create(order_reference=event["reference"], handled_by=str(os.getpid()))
    # Long enough for the other delivery to arrive while this one's transaction is open.
    time.sleep(float(event.get("linger", 0)))


@app.task(base=InboxTask, name="tests.ship", inbox_consumer="shipping", bind=True)  # type: ignore[untyped-decorator]
def ship(self: InboxTask, event: dict[str, Any]) -> None:
    ship_body(self.request.id, event)


@app.task(name="tests.ship_unguarded", bind=True)  # type: ignore[untyped-decorator]
def ship_unguarded(self: Any, event: dict[str, Any]) -> None:
    """The same body without the inbox: what the inbox is there to prevent."""
    ship_body(self.request.id, event)


trace_celery_worker()
