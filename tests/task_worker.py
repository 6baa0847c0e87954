"""The Celery app of the task backend's tests: ``celery -A tests.task_worker worker``,
against the test database (``EVENTFERRY_TEST_DB_NAME``) and a queue of the test's own
(``EVENTFERRY_TEST_QUEUE``) on RabbitMQ. It finds eventferry's runner task by Django
autodiscovery, as a project's app does. Workers append what they do to
``EVENTFERRY_TEST_TRACE`` as JSON lines (``ready``, ``start``, ``end`` with the runner's
outcome and the queue the message came from)."""

from __future__ import annotations

import os
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

from .worker_trace import trace_celery_worker, worker_app  # noqa: E402

app = worker_app("eventferry-task-tests", broker_transport_options={"confirm_publish": True})
app.autodiscover_tasks()


def _outcome_and_queue(task: Any, retval: Any) -> dict[str, Any]:
    delivery = task.request.delivery_info or {}
    return {"outcome": retval, "queue": delivery.get("routing_key")}


trace_celery_worker(_outcome_and_queue)
