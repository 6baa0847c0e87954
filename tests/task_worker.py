"""The Celery app of the task backend's tests: ``celery -A tests.task_worker worker``,
against the test database (``EVENTFERRY_TEST_DB_NAME``) and a queue of the test's own
(``EVENTFERRY_TEST_QUEUE``) on RabbitMQ. It finds eventferry's runner task by Django
autodiscovery, as a project's app does. Workers append what they do to
``EVENTFERRY_TEST_TRACE`` as JSON lines (``ready``, ``start``, ``end`` with the runner's
outcome and the queue the message came from)."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

from celery import Celery, signals  # noqa: E402

BROKER_URL = os.environ.get("EVENTFERRY_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")

app = Celery("eventferry-task-tests", broker=BROKER_URL)
app.conf.update(
    task_default_queue=os.environ.get("EVENTFERRY_TEST_QUEUE", "eventferry-task-tests"),
    worker_prefetch_multiplier=1,
    task_ignore_result=True,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    broker_transport_options={"confirm_publish": True},
)
app.autodiscover_tasks()


def trace(event: str, **fields: Any) -> None:
    path = os.environ.get("EVENTFERRY_TEST_TRACE")
    if path:
        line = json.dumps({"event": event, "pid": os.getpid(), "t": time.time(), **fields})
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


@signals.worker_ready.connect
def _ready(**kwargs: Any) -> None:
    trace("ready")


@signals.task_prerun.connect
def _started(task_id: str, task: Any, **kwargs: Any) -> None:
    trace("start", task_id=task_id, task=task.name)


@signals.task_postrun.connect
def _finished(task_id: str, task: Any, retval: Any = None, **kwargs: Any) -> None:
    delivery = task.request.delivery_info or {}
    trace("end", task_id=task_id, task=task.name, outcome=retval,
          queue=delivery.get("routing_key"))
