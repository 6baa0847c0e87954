"""The tests' worker and consumer processes: the Celery app each worker module starts
from (:func:`worker_app`), and what they append to ``EVENTFERRY_TEST_TRACE``: one JSON
line for each thing they do (``ready``, a task's ``start`` and ``end``, a handler's
``body``...), with pid and time, so that a test can tell which process ran what, and
when. ``inbox_processes.read_trace`` reads it back."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

#: What a worker adds to a task's ``end`` line, from the task and its return value.
EndFields = Callable[[Any, Any], dict[str, Any]]

#: The RabbitMQ the workers and consumers take their messages from.
BROKER_URL = os.environ.get("EVENTFERRY_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")


def worker_app(name: str, **conf: Any) -> Any:
    """A Celery app named ``name`` on :data:`BROKER_URL` and the test's own queue
    (``EVENTFERRY_TEST_QUEUE``, else ``name``): one message at a time per worker, no
    results, the test's logging kept; ``conf`` adds to that."""
    from celery import Celery

    app = Celery(name, broker=BROKER_URL)
    app.conf.update(
        task_default_queue=os.environ.get("EVENTFERRY_TEST_QUEUE", name),
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        **conf,
    )
    return app


def trace(event: str, **fields: Any) -> None:
    path = os.environ.get("EVENTFERRY_TEST_TRACE")
    if path:
        line = json.dumps({"event": event, "pid": os.getpid(), "t": time.time(), **fields})
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def trace_celery_worker(end_fields: EndFields = lambda task, retval: {}) -> None:
    """Trace this process's Celery worker: ``ready``, then ``start`` and ``end`` (with
    ``end_fields``) around each task."""
    from celery import signals

    def ready(**kwargs: Any) -> None:
        trace("ready")

    def started(task_id: str, task: Any, **kwargs: Any) -> None:
        trace("start", task_id=task_id, task=task.name)

    def finished(task_id: str, task: Any, retval: Any = None, **kwargs: Any) -> None:
        trace("end", task_id=task_id, task=task.name, **end_fields(task, retval))

    # Strong references: the receivers live in this function only.
    signals.worker_ready.connect(ready, weak=False)
    signals.task_prerun.connect(started, weak=False)
    signals.task_postrun.connect(finished, weak=False)
