"""The Django tasks' results table: the state transitions of one task's result.

Each transition is one short UPDATE guarded by the states it may leave, so a delivery
that arrives after the task finished (the relay published it twice) changes nothing:

``READY`` (written with the outbox row by ``enqueue()``) -> ``RUNNING`` (:meth:`start`,
once per attempt: attempts, worker id, times) -> ``SUCCESSFUL`` (:meth:`succeed`, in the
transaction of the task's own writes) or ``FAILED`` (:meth:`fail`, after that
transaction rolled back).
"""

from __future__ import annotations

import datetime as dt
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from .models import (
    UNFINISHED_TASK_STATUSES,
    OutboxEvent,
    Status,
    TaskResultRecord,
    TaskResultStatus,
)


def error_entry(exc: BaseException) -> dict[str, str]:
    """How an exception is kept in the ``errors`` column (``django.tasks``' TaskError)."""
    kind = type(exc)
    return {"exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
            "traceback": "".join(traceback.format_exception(exc))}


@dataclass(frozen=True)
class TaskResultStore:
    """The results table on the database ``alias`` (the outbox's)."""

    alias: str

    def _rows(self) -> Any:
        return TaskResultRecord.objects.using(self.alias)

    def create(self, *, result_id: str, task_path: str, backend: str, queue_name: str,
               priority: int, arguments: Mapping[str, Any], run_after: dt.datetime | None,
               enqueued_at: dt.datetime) -> TaskResultRecord:
        """The READY row of a task just enqueued, in the caller's transaction."""
        return self._rows().create(  # type: ignore[no-any-return]
            result_id=result_id, task_path=task_path, backend=backend,
            queue_name=queue_name, priority=priority, status=TaskResultStatus.READY,
            arguments=dict(arguments), run_after=run_after, enqueued_at=enqueued_at,
            worker_ids=[], errors=[])

    def get(self, result_id: str) -> TaskResultRecord | None:
        return self._rows().filter(result_id=result_id).first()  # type: ignore[no-any-return]

    def start(self, result_id: str, worker_id: str) -> TaskResultRecord | None:
        """Mark the task RUNNING for one more attempt by ``worker_id``, in a transaction
        of its own (so ``get_result()`` sees it while the task runs); None when it
        finished before (or has no row), and then nothing is to run."""
        now = timezone.now()
        with transaction.atomic(using=self.alias):
            row = (self._rows().select_for_update()
                   .filter(result_id=result_id, status__in=UNFINISHED_TASK_STATUSES).first())
            if row is None:
                return None
            row.status = TaskResultStatus.RUNNING
            row.started_at = row.started_at or now
            row.last_attempted_at = now
            row.attempts += 1
            row.worker_ids = [*(row.worker_ids or []), worker_id]
            row.save(update_fields=["status", "started_at", "last_attempted_at", "attempts",
                                    "worker_ids"])
        return row  # type: ignore[no-any-return]

    def succeed(self, result_id: str, value: Any) -> None:
        """Mark the task SUCCESSFUL with its return value; call it inside the transaction
        of the task's own writes, so both commit or neither."""
        self._rows().filter(result_id=result_id, status=TaskResultStatus.RUNNING).update(
            status=TaskResultStatus.SUCCESSFUL, return_value={"value": value},
            finished_at=timezone.now())

    def fail(self, result_id: str, exc: BaseException) -> None:
        """Mark the task FAILED with ``exc`` and its traceback, in a transaction of its
        own (the task's rolled back)."""
        with transaction.atomic(using=self.alias):
            row = (self._rows().select_for_update()
                   .filter(result_id=result_id, status__in=UNFINISHED_TASK_STATUSES).first())
            if row is None:
                return
            row.status = TaskResultStatus.FAILED
            row.finished_at = timezone.now()
            row.errors = [*(row.errors or []), error_entry(exc)]
            row.save(update_fields=["status", "finished_at", "errors"])

    def dead_reason(self, result_id: str) -> str | None:
        """The last error of the task's outbox row if it went dead (the relay gave up
        delivering it); None otherwise."""
        row = (OutboxEvent.objects.using(self.alias)
               .filter(message_id=result_id, status=Status.DEAD)
               .values_list("last_error", flat=True).first())
        if row is None:
            return None
        return row or "the outbox row went dead"

    def purge(self, cutoff: dt.datetime, *, batch_size: int = 1000,
              max_rows: int | None = None, dry_run: bool = False,
              progress: Callable[[int], None] | None = None) -> int:
        """Delete results that finished before ``cutoff``, ``batch_size`` at a time (each
        batch its own short statement), until a batch comes back short or the soft cap
        ``max_rows`` is passed; READY and RUNNING results are never deleted. Returns how
        many were (with ``dry_run``: would be)."""
        finished = self._rows().finished().filter(finished_at__lt=cutoff)
        if dry_run:
            count: int = finished.count()
            return count if max_rows is None else min(count, max_rows)
        deleted = 0
        while max_rows is None or deleted < max_rows:
            ids = list(finished.order_by("id").values_list("id", flat=True)[:batch_size])
            if not ids:
                break
            deleted += self._rows().filter(id__in=ids).delete()[0]
            if progress is not None:
                progress(deleted)
            if len(ids) < batch_size:
                break
        return deleted
