"""A publisher that turns each message into a Celery task.

For projects whose consumers are Celery workers: the event's payload becomes the task's
single argument, so ``@app.task(name="orders.created") def on_order(event): ...`` is the
whole consumer.

Configure it with::

    EVENTFERRY = {"PUBLISHER": {
        "BACKEND": "eventferry_django.publishers.celery.CeleryPublisher",
        "OPTIONS": {
            "app": "myproject.celery.app",
            "task": {"order.created": "billing.on_order_created", "*": "audit.on_event"},
        },
    }}
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.checks import CheckMessage, Error
from django.utils.module_loading import import_string

from .base import (
    OutboundMessage,
    Outcome,
    Publisher,
    PublishResult,
    mask_url,
)
from .celery_sender import CelerySender, TaskCall
from .message_format import MessageFormat
from .options import Option, OptionTable, is_name, positive_seconds, raise_if_serious

FALLBACK = "*"


def _task_problem(task: object) -> str | None:
    if isinstance(task, Mapping):
        if not task or any(not (is_name(k) and is_name(v)) for k, v in task.items()):
            return ("the mapping must be non-empty, topic names to task names (all "
                    f"non-blank strings; {FALLBACK!r} as the fallback topic)")
        return None
    if not isinstance(task, str):
        return "must be a task name or a mapping of topic to task name"
    return None


def _app_problem(app: object) -> str | None:
    if app is None:
        return None
    if not is_name(app):
        return "must be the dotted path of a Celery app"
    try:
        target = import_string(str(app))
    except ImportError as exc:
        return f"cannot be imported: {exc}"
    if not callable(getattr(target, "send_task", None)):
        return "is not a Celery app (it has no send_task)"
    return None


def _queue_problem(queue: object) -> str | None:
    return None if queue is None or is_name(queue) else "must be a queue name or None"


def _check_broker(app: Any) -> list[CheckMessage]:
    """Resolve the app's broker transport, which imports its client library (redis
    for ``redis://``), without connecting."""
    try:
        connection = app.connection_for_write()
        try:
            connection.transport  # noqa: B018 (the lookup is the check)
        finally:
            connection.release()
    except Exception as exc:  # kombu raises ImportError, KeyError, ValueError...
        return [Error(
            f"CeleryPublisher: the Celery app's broker {mask_url(str(app.conf.broker_url))} "
            f"cannot be used: {exc!r}.",
            hint='pip install "eventferry-django[celery]" brings Celery with the Redis '
            "client; another broker needs the library Celery names for it.",
            id="eventferry.E044",
        )]
    return []


#: CeleryPublisher's OPTIONS, declared once: ``check()`` and the constructor's defaults.
OPTIONS = OptionTable((
    Option("task", "eventferry.E042", _task_problem,
           required="a task name, or a mapping of topic to task name, is required",
           required_id="eventferry.E040"),
    Option("app", "eventferry.E042", _app_problem),
    Option("queue", "eventferry.E042", _queue_problem),
    Option("publish_timeout", "eventferry.E042", positive_seconds, default=10),
), unknown_id="eventferry.E041")

#: The OPTIONS' names (kept from before the table).
OPTION_NAMES = frozenset(OPTIONS.names)


class CeleryPublisher(Publisher):
    """Sends each message as a Celery task through the Celery app's broker connection.

    OPTIONS:

    ``task`` (required)
        The task name for every message, or a mapping of topic to task name in which the
        key ``"*"`` catches the topics not listed. A topic with no task and no ``"*"`` gets
        ``GIVE_UP``: no amount of retrying will find it a task.
    ``app`` (``celery.current_app``)
        Dotted path of the Celery app instance, e.g. ``"myproject.celery.app"``.
    ``queue`` (None)
        Queue name passed to ``send_task``; by default the app's routing decides.
    ``publish_timeout`` (10)
        Seconds one ``send_task`` may spend writing, and waiting for its confirm if the app
        has publisher confirms on.

    The task is ``send_task(task, args=[payload], kwargs={}, task_id=message_id, headers=
    ...)`` with ``payload`` the event's JSON payload decoded, so the task id is the outbox
    message id and a consumer can deduplicate on it. Headers are those of
    :func:`~eventferry_django.publishers.base.broker_headers`, minus event headers that
    collide with Celery's own (:data:`~.celery_sender.CELERY_HEADERS`). In the CloudEvents formats
    (``EVENTFERRY["MESSAGE_FORMAT"]``, see :mod:`~.message_format`) binary mode adds the
    ``cloudEvents_*`` headers to a task whose argument is the payload, and structured
    mode's task argument is the whole CloudEvent (its ``data`` the payload).

    Broker behaviour comes from the Celery app: connection pool, ``broker_connection_timeout``
    and ``task_publish_retry_policy``. Publisher confirms are off unless the app sets
    ``broker_transport_options = {"confirm_publish": True}`` (RabbitMQ); without them
    ``OK`` means only that the message was written to the socket. With them each task
    waits for its own confirm, one round trip per message: for high volume to RabbitMQ,
    :class:`~eventferry_django.publishers.kombu.KombuPublisher` pipelines a whole batch.

    Order: tasks are enqueued one after another in the order given, through one producer;
    that enqueue order is what is preserved. Workers with concurrency > 1 (or several
    workers) run tasks of one aggregate in parallel, so execution order is not kept.

    Outcomes: sent -> ``OK``; no task for the topic, a payload that is not JSON or that
    the app's serializer cannot encode -> ``GIVE_UP``; connection errors (kombu's
    ``OperationalError`` and the transport's connection and channel errors) raise
    :class:`BrokerUnavailable`. Tasks sent before the error in such a batch will be sent
    again with the batch: delivery is at least once.
    """

    def __init__(self, **options: Any) -> None:
        given = {**OPTIONS.defaults(), **options}
        super().__init__(**given)
        raise_if_serious(self.check(given))
        task: str | Mapping[str, str] = given["task"]  # check() reported E040 if missing
        self.tasks: Mapping[str, str] = {FALLBACK: task} if isinstance(task, str) else task
        self.app_path: str | None = given["app"]
        self.queue: str | None = given["queue"]
        self.publish_timeout = float(given["publish_timeout"])
        self.message_format = MessageFormat.from_settings()
        self.sender = CelerySender(self.app_path, self.publish_timeout)

    @classmethod
    def check(cls, options: Mapping[str, Any]) -> list[CheckMessage]:
        """The OPTIONS table's checks, then the app's broker transport (E044)."""
        installed = importlib.util.find_spec("celery") is not None
        messages = cls.missing_dependency(installed, "celery", "celery", "eventferry.E043")
        messages += OPTIONS.check(cls, options)
        app = options.get("app")
        if installed and _app_problem(app) is None:
            messages += _check_broker(
                importlib.import_module("celery").current_app if app is None
                else import_string(str(app)))
        return messages

    def describe(self) -> str:
        app = self.sender.app()
        tasks = ", ".join(f"{topic} -> {task}" for topic, task in self.tasks.items())
        return (f"CeleryPublisher app {app.main or 'current'!r} broker {self.sender.broker()} "
                f"task {tasks}")

    def task_for(self, topic: str) -> str | None:
        """The task name for ``topic``, or None when it has none."""
        return self.tasks.get(topic, self.tasks.get(FALLBACK))

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        return self.sender.send(messages, self.task_call)

    def task_call(self, message: OutboundMessage) -> TaskCall | PublishResult:
        """The task ``message`` becomes: its topic's task, the payload its one argument,
        the message format's headers, OPTIONS' queue; or why it cannot be one."""
        name = self.task_for(message.topic)
        if name is None:
            return PublishResult(
                Outcome.GIVE_UP,
                f"no Celery task for topic {message.topic!r}: OPTIONS['task'] maps only "
                f"{sorted(self.tasks)} and has no {FALLBACK!r} fallback",
            )
        envelope = self.message_format.envelope(message)
        try:
            payload = json.loads(envelope.body)
        except ValueError as exc:
            return PublishResult(Outcome.GIVE_UP, f"payload is not JSON: {exc}")
        return TaskCall(name, payload, envelope.headers, self.queue)
