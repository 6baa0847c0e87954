"""``OutboxTaskBackend``: Django's Tasks framework on the outbox, run by Celery workers.

    TASKS = {"default": {
        "BACKEND": "eventferry_django.task_backend.OutboxTaskBackend",
        "OPTIONS": {"celery_app": "myproject.celery.app"},
    }}

``Task.enqueue()`` writes one outbox row (and the task's READY result) in the current
transaction on the outbox's database: the task exists if and only if the caller's
changes commit. The relay (``outbox_relay``) delivers the row to the Celery app named in
OPTIONS (:mod:`.publishers.task_routing`), whatever ``EVENTFERRY["PUBLISHER"]`` is, as a
message for the one runner task (:mod:`.task_runner`) that runs the Django task once per
result id and records its result.

OPTIONS:

``celery_app`` (required)
    Dotted path of the Celery app whose workers run the tasks.
``database`` (``EVENTFERRY["DATABASE"]``)
    The outbox's database alias the task rows and results are written to; the task's own
    writes are exactly-once when they go there too.
``allow_autocommit`` (False)
    Let ``enqueue()`` outside a transaction write (and commit) the task at once; by
    default it raises ``NotInTransaction`` as ``publish_event()`` does.

Flags: ``run_after`` is supported (the outbox's scheduled delivery: no relay takes the
row before that time, by the database's clock); ``queue_name`` is the Celery queue
(``"default"`` leaves the Celery app's own routing to choose); ``priority`` is refused
(Celery's brokers order by queue, not by a per-message number, so it would be a promise
the outbox cannot keep); async task functions are run with ``async_to_sync``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from functools import partial
from typing import Any

from django.db import connections, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from . import task_api
from .conf import get_settings
from .enqueue import publish_event
from .exceptions import TaskNotDelivered
from .models import TaskResultRecord, TaskResultStatus
from .task_messages import (
    AGGREGATE_TYPE,
    QUEUE_HEADER,
    NotJson,
    TaskMessage,
    check_json,
    topic_for,
)
from .task_results import TaskResultStore
from .transactions import require_transaction

task_api.require()

def unavailable_task() -> None:
    """Stands for a task whose function can no longer be imported, in the results of
    ``get_result()``."""
    raise ImportError("this task's function can no longer be imported")


class OutboxTaskBackend(task_api.BaseTaskBackend):  # type: ignore[misc]
    """A ``django.tasks`` backend that enqueues through the transactional outbox."""

    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = False

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.celery_app: str | None = self.options.get("celery_app")
        self._database: str | None = self.options.get("database")
        self.allow_autocommit: bool = bool(self.options.get("allow_autocommit", False))

    @property
    def database(self) -> str:
        """The alias the task rows and results are written to."""
        return self._database or get_settings().database

    # -- enqueue -----------------------------------------------------------------------
    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        self.validate_task(task)
        try:
            arguments = {"args": check_json(list(args), "args"),
                         "kwargs": check_json(dict(kwargs), "kwargs")}
        except NotJson as exc:
            raise task_api.InvalidTask(
                f"{task.module_path}.enqueue(): {exc} Nothing was enqueued.") from None
        alias = self.database
        if not self.allow_autocommit:
            require_transaction(alias, f"{task.module_path}.enqueue()",
                                "the task is enqueued if and only if your changes commit")
        result_id = str(uuid.uuid4())
        message = TaskMessage(task.module_path, arguments["args"], arguments["kwargs"],
                              self.alias, task.queue_name)
        # In autocommit (allowed by OPTIONS) the row and its result commit together; in
        # the caller's transaction nothing is added, so a refused task (InvalidEvent:
        # too large, say) leaves that transaction usable.
        opened = (contextlib.nullcontext() if connections[alias].in_atomic_block
                  else transaction.atomic(using=alias))
        with opened:
            publish_event(
                topic_for(self.alias), message.payload(), aggregate_type=AGGREGATE_TYPE,
                aggregate_id=result_id, message_id=result_id,
                headers={QUEUE_HEADER: task.queue_name}, deliver_at=task.run_after,
                using=alias)
            record = TaskResultStore(alias).create(
                result_id=result_id, task_path=task.module_path, backend=self.alias,
                queue_name=task.queue_name, priority=task.priority, arguments=arguments,
                run_after=task.run_after, enqueued_at=timezone.now())
        result = to_task_result(record, task=task)
        transaction.on_commit(
            partial(task_api.task_enqueued.send, type(self), task_result=result), using=alias)
        return result

    # -- results -----------------------------------------------------------------------
    def get_result(self, result_id: str) -> Any:
        store = TaskResultStore(self.database)
        record = store.get(result_id)
        if record is None:
            raise task_api.TaskResultDoesNotExist(result_id)
        # Only a task no worker has taken can have been given up on by the relay.
        dead = (store.dead_reason(result_id) if record.status == TaskResultStatus.READY
                else None)
        return to_task_result(record, dead_reason=dead)

    # The OPTIONS are checked by eventferry's own system check
    # (:mod:`eventferry_django.task_checks`), which runs whether or not the Tasks
    # framework registered its checks.


# -- TaskResult from a row ------------------------------------------------------------------
def load_task(task_path: str) -> Any:
    """The ``Task`` at ``task_path``; ``ImportError`` when there is none."""
    try:
        found = import_string(task_path)
    except ImportError:
        raise
    except Exception as exc:  # a module that fails to import some other way: the same
        raise ImportError(f"cannot import {task_path}: {exc!r}") from exc
    if not isinstance(found, task_api.Task):
        raise ImportError(f"{task_path} is not a Django task (decorate it with @task)")
    return found


def to_task_result(record: TaskResultRecord, *, task: Any = None,
                   dead_reason: str | None = None) -> Any:
    """The framework's ``TaskResult`` for a results row. A READY task whose outbox row
    went dead (``dead_reason``) is FAILED with :class:`TaskNotDelivered`."""
    if task is None:
        try:
            task = load_task(record.task_path)
        except ImportError:
            task = task_api.Task(func=unavailable_task)
        task = task.using(priority=record.priority, queue_name=record.queue_name,
                          run_after=record.run_after, backend=record.backend)
    status = record.status
    errors = [task_api.TaskError(exception_class_path=e["exception_class_path"],
                                 traceback=e["traceback"]) for e in record.errors or []]
    finished_at = record.finished_at
    if dead_reason is not None:
        status = TaskResultStatus.FAILED
        kind = TaskNotDelivered
        errors.append(task_api.TaskError(
            exception_class_path=f"{kind.__module__}.{kind.__qualname__}",
            traceback=f"the relay gave up delivering the task: {dead_reason}"))
    arguments = record.arguments or {}
    values: dict[str, Any] = {
        "task": task, "id": record.result_id, "status": task_api.TaskResultStatus(status),
        "enqueued_at": record.enqueued_at, "started_at": record.started_at,
        "finished_at": finished_at, "last_attempted_at": record.last_attempted_at,
        "args": list(arguments.get("args", [])), "kwargs": dict(arguments.get("kwargs", {})),
        "backend": record.backend, "errors": errors,
        "worker_ids": list(record.worker_ids or []),
    }
    # Django 6.0 and the backport differ in a few fields: pass those this one takes.
    accepted = {f.name for f in dataclasses.fields(task_api.TaskResult) if f.init}
    result = task_api.TaskResult(**{k: v for k, v in values.items() if k in accepted})
    if status == TaskResultStatus.SUCCESSFUL and record.return_value is not None:
        object.__setattr__(result, "_return_value", record.return_value.get("value"))
    return result
