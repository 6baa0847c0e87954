"""The publisher of Django task rows: each becomes a message for the one runner task
(:data:`~eventferry_django.task_messages.RUNNER_TASK`) on the Celery app an
``OutboxTaskBackend`` names, on the Celery queue of the task's ``queue_name``.

Built by :mod:`.task_routing`, never named in ``EVENTFERRY["PUBLISHER"]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from django.utils.module_loading import import_string

from ..task_messages import QUEUE_HEADER, RUNNER_TASK
from .base import OutboundMessage, Outcome, Publisher, PublishResult, broker_headers
from .celery import OPTIONS as CELERY_OPTIONS
from .celery_sender import CelerySender, TaskCall

#: The Django queue name that leaves the Celery app's own routing to choose the queue.
DEFAULT_QUEUE = "default"


class TaskRunnerPublisher(Publisher):
    """Sends task rows to the Celery app at ``app``: each a call of the runner task
    whose task id is the result id and whose one argument is the row's payload, as
    stored (whatever ``EVENTFERRY["MESSAGE_FORMAT"]`` says: the runner reads the payload
    itself), on the Celery queue of the task's ``queue_name``.

    A row whose task cannot be imported here goes dead (``GIVE_UP``) rather than to a
    worker that could not run it either; ``get_result()`` then reports it FAILED with
    the reason. Outages are the Celery publisher's (:class:`.CelerySender`).
    """

    def __init__(self, *, app: str) -> None:
        super().__init__(app=app)
        self.sender = CelerySender(app, float(CELERY_OPTIONS["publish_timeout"].default))

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        return self.sender.send(messages, task_call)

    def describe(self) -> str:
        return f"Django tasks via Celery app {self.app_path!r} broker {self.sender.broker()}"

    @property
    def app_path(self) -> str | None:
        return self.sender.app_path


def task_call(message: OutboundMessage) -> TaskCall | PublishResult:
    """The runner's call for a task row, or ``GIVE_UP`` when no worker could run it."""
    problem = _unrunnable(message)
    if problem is not None:
        return PublishResult(Outcome.GIVE_UP, problem)
    queue = message.headers.get(QUEUE_HEADER)
    return TaskCall(RUNNER_TASK, json.loads(message.payload), broker_headers(message),
                    None if not isinstance(queue, str) or queue == DEFAULT_QUEUE else queue)


def _unrunnable(message: OutboundMessage) -> str | None:
    """Why ``message`` cannot be run by any worker of this code, or None."""
    try:
        payload: Any = json.loads(message.payload)
        path = payload["task_path"]
    except (ValueError, KeyError, TypeError) as exc:
        return f"not a Django task message: {exc!r}"
    try:
        import_string(path)
    except ImportError as exc:
        return f"the task {path!r} cannot be imported: {exc}"
    return None
