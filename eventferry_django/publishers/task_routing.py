"""A publisher in front of the others: Django task rows to the Celery app of their
``OutboxTaskBackend``, every other row to ``EVENTFERRY["PUBLISHER"]``.

The relay is built with it (:func:`~eventferry_django.relay.config.build_publisher`)
whenever ``TASKS`` names an ``OutboxTaskBackend``, so one ``outbox_relay`` delivers
events to their broker and tasks to their workers; it knows nothing else of tasks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from django.utils.module_loading import import_string

from ..task_messages import backend_of
from .base import OutboundMessage, Outcome, Publisher, PublishResult


class TaskRouting(Publisher):
    """Splits each batch by destination, hands each part to its publisher in the batch's
    order, and answers in the batch's order. Rows of one aggregate share a destination,
    so a chain stays whole and ordered within its part.

    When one destination's broker is unavailable, :class:`BrokerUnavailable` propagates
    and the relay hands the whole batch back: the other part may then be delivered
    again (delivery is at least once; the inbox makes a task's effects once).
    """

    def __init__(self, events: Publisher, tasks: Mapping[str, Publisher]) -> None:
        super().__init__()
        self.events = events
        self.tasks = dict(tasks)

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        parts: dict[str | None, list[int]] = {}
        for i, message in enumerate(messages):
            parts.setdefault(backend_of(message.topic), []).append(i)
        results: list[PublishResult | None] = [None] * len(messages)
        for backend, indexes in parts.items():
            publisher = self.events if backend is None else self.tasks.get(backend)
            if publisher is None:
                answers = [PublishResult(
                    Outcome.GIVE_UP, f"no OutboxTaskBackend named {backend!r} in TASKS")
                    ] * len(indexes)
            else:
                answers = publisher.publish([messages[i] for i in indexes])
            for i, answer in zip(indexes, answers, strict=True):
                results[i] = answer
        return [r for r in results if r is not None]

    def describe(self) -> str:
        tasks = ", ".join(f"{alias}: {p.describe()}" for alias, p in self.tasks.items())
        return f"{self.events.describe()}; tasks {tasks}"

    def close(self) -> None:
        for publisher in (self.events, *self.tasks.values()):
            publisher.close()


def task_publishers() -> dict[str, Publisher]:
    """A :class:`~.task_runner.TaskRunnerPublisher` for each ``OutboxTaskBackend`` in
    ``TASKS``, by alias; none without Django's Tasks framework."""
    from .. import task_api

    if not task_api.AVAILABLE:
        return {}
    from ..task_backend import OutboxTaskBackend
    from .task_runner import TaskRunnerPublisher

    publishers: dict[str, Publisher] = {}
    for alias, params in task_api.task_backends.settings.items():
        # Only OutboxTaskBackends are built: another backend's set-up is not the relay's.
        try:
            backend_class = import_string(params["BACKEND"])
        except (ImportError, KeyError, TypeError):
            continue
        if not (isinstance(backend_class, type) and issubclass(backend_class, OutboxTaskBackend)):
            continue
        backend = task_api.task_backends[alias]
        if backend.celery_app:
            publishers[alias] = TaskRunnerPublisher(app=backend.celery_app)
    return publishers


def route_tasks(events: Publisher) -> Publisher:
    """``events`` behind a :class:`TaskRouting` when ``TASKS`` has an
    ``OutboxTaskBackend``; ``events`` itself otherwise."""
    tasks = task_publishers()
    return TaskRouting(events, tasks) if tasks else events
