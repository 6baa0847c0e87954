"""What a Django task looks like in the outbox: its topic, headers and payload.

:class:`~eventferry_django.task_backend.OutboxTaskBackend` writes these, the relay's
:class:`~eventferry_django.publishers.task_routing.TaskRouting` tells task rows from
events by their topic, and the runner reads the payload back. Nothing here touches a
database or a broker.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Task rows' topics start with this, then the backend's alias (a ``TASKS`` key); an
#: event topic cannot be mistaken for one unless it is spelled the same on purpose.
TOPIC_PREFIX = "eventferry.django-task/"

#: The outbox row's ``aggregate_type`` of a task row; its ``aggregate_id`` is the result
#: id, so tasks never wait for each other in the outbox.
AGGREGATE_TYPE = "django-task"

#: The row header naming the Celery queue the task goes to.
QUEUE_HEADER = "task_queue"

#: The Celery task every task row is sent as (registered in :mod:`eventferry_django.tasks`).
RUNNER_TASK = "eventferry.run_django_task"


def topic_for(backend: str) -> str:
    """The outbox topic of tasks enqueued through the backend named ``backend``."""
    return f"{TOPIC_PREFIX}{backend}"


def backend_of(topic: str) -> str | None:
    """The backend alias of a task row's topic; None for an event's topic."""
    if topic.startswith(TOPIC_PREFIX):
        return topic[len(TOPIC_PREFIX):] or None
    return None


@dataclass(frozen=True)
class TaskMessage:
    """A task row's payload: which task, with what, through which backend."""

    task_path: str
    args: list[Any]
    kwargs: dict[str, Any]
    backend: str
    queue_name: str

    def payload(self) -> dict[str, Any]:
        return {"task_path": self.task_path, "args": self.args, "kwargs": self.kwargs,
                "backend": self.backend, "queue_name": self.queue_name}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> TaskMessage:
        """The message a runner received; ``ValueError`` naming what is missing or wrong."""
        try:
            message = cls(str(payload["task_path"]), list(payload["args"]),
                          dict(payload["kwargs"]), str(payload["backend"]),
                          str(payload["queue_name"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a task message ({exc!r}): {dict(payload)!r:.200}") from None
        return message


class NotJson(ValueError):
    """A value that cannot travel as JSON; the message names where it is."""


def check_json(value: Any, path: str) -> Any:
    """``value`` as JSON holds it (tuples become lists), or :class:`NotJson` naming the
    path of the first value JSON cannot hold exactly, e.g. ``kwargs['when']`` or
    ``args[1][0]``: dicts need string keys; floats must be finite; only ``dict``,
    ``list``, ``tuple``, ``str``, ``int``, ``float``, ``bool`` and ``None`` pass, so a
    worker gets back what the caller gave."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotJson(f"{path} is {value!r}, which JSON cannot hold.")
        return value
    if isinstance(value, list | tuple):
        return [check_json(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        checked: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotJson(f"{path} has the key {key!r}; JSON object keys are strings.")
            checked[key] = check_json(item, f"{path}[{key!r}]")
        return checked
    raise NotJson(
        f"{path} is a {type(value).__module__}.{type(value).__qualname__} ({value!r:.80}), "
        "which is not JSON-serialisable: pass str, int, float, bool, None, or lists and "
        "dicts of them (an id rather than a model instance, an ISO string rather than a "
        "datetime)."
    )
