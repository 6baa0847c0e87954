"""Running one delivered Django task: once per result id, its result recorded.

The relay may deliver a task twice (it crashed after the broker took the message and
before it marked the row done), and Celery may redeliver it (a worker died mid-task with
``acks_late``). So the runner:

1. marks the result RUNNING (one more attempt, this worker's id), unless it finished
   before: then there is nothing to do;
2. opens a transaction on the outbox's database, records the result id in the inbox
   (consumer :data:`INBOX_CONSUMER`) and, the first time only, runs the task and marks
   the result SUCCESSFUL with its return value, in that same transaction: the task's own
   writes to that database, the inbox row and the result commit together, or not at all;
3. on an exception, after that transaction rolled back, marks the result FAILED with
   the exception and its traceback. Django's tasks are not retried: a failed task stays
   failed.

Celery-free: :mod:`eventferry_django.tasks` is the Celery face that calls :func:`run`.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from typing import Any

from django.db import close_old_connections, transaction

from . import task_api
from .conf import get_settings
from .inbox import record_message
from .task_backend import load_task, to_task_result
from .task_messages import NotJson, TaskMessage, check_json
from .task_results import TaskResultStore

logger = logging.getLogger(__name__)

#: The inbox consumer under which task runs are recorded.
INBOX_CONSUMER = "eventferry.django_tasks"


class Outcome(enum.Enum):
    SUCCESSFUL = "successful"
    FAILED = "failed"
    #: Ran before (a second delivery): nothing done.
    DUPLICATE = "duplicate"


def database_for(backend: str) -> str:
    """The outbox database of the task backend ``backend`` (its OPTIONS' ``database``)."""
    try:
        configured = task_api.task_backends[backend]
    except Exception:  # the alias is no longer in TASKS: the outbox's own database
        return get_settings().database
    return str(getattr(configured, "database", None) or get_settings().database)


def run(result_id: str, payload: Mapping[str, Any], worker_id: str) -> Outcome:
    """Run the task of ``payload`` (a task row's payload) for ``result_id`` once."""
    message = TaskMessage.from_payload(payload)
    alias = database_for(message.backend)
    store = TaskResultStore(alias)
    close_old_connections()
    try:
        record = store.start(result_id, worker_id)
        if record is None:
            logger.info("task %s (%s) finished before: skipped", result_id, message.task_path)
            return Outcome.DUPLICATE
        try:
            task = load_task(message.task_path)
        except ImportError as exc:
            store.fail(result_id, exc)
            logger.error("task %s: %s", result_id, exc)
            return Outcome.FAILED
        result = to_task_result(record, task=task)
        task_api.task_started.send(type(task.get_backend()), task_result=result)
        try:
            with transaction.atomic(using=alias):
                if not record_message(INBOX_CONSUMER, result_id, using=alias):
                    return Outcome.DUPLICATE
                value = _call(task, result, message)
                store.succeed(result_id, check_json(value, "the return value"))
        except Exception as exc:  # the task's failure is its result
            logger.exception("task %s (%s) failed", result_id, message.task_path)
            store.fail(result_id, exc)
            outcome = Outcome.FAILED
        else:
            outcome = Outcome.SUCCESSFUL
        finished = store.get(result_id)
        if finished is not None:
            task_api.task_finished.send(type(task.get_backend()),
                                        task_result=to_task_result(finished, task=task))
        return outcome
    finally:
        close_old_connections()


def _call(task: Any, result: Any, message: TaskMessage) -> Any:
    if task.takes_context:
        return task.call(task_api.TaskContext(task_result=result), *message.args,
                         **message.kwargs)
    return task.call(*message.args, **message.kwargs)


__all__ = ["INBOX_CONSUMER", "NotJson", "Outcome", "run"]
