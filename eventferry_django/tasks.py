"""Celery tasks: a relay pass, the purges and an archive, for projects that schedule
with Celery beat instead of running ``manage.py outbox_relay`` as a service; and the
runner of the Django tasks enqueued through ``OutboxTaskBackend`` (``eventferry.
run_django_task``), which a worker finds by autodiscovery (``app.autodiscover_tasks()``
imports this module). Import needs Celery; the archive task needs the ``spark`` extra
when it runs, and the runner Django's Tasks framework, not when it is imported.

    app.conf.beat_schedule = {
        "eventferry-relay": {"task": "eventferry.relay", "schedule": 5.0},
        "eventferry-purge": {"task": "eventferry.purge", "schedule": 3600.0,
                             "kwargs": {"older_than": "7d"}},
        "eventferry-purge-inbox": {"task": "eventferry.purge_inbox", "schedule": 3600.0,
                                   "kwargs": {"older_than": "30d"}},
        "eventferry-purge-task-results": {"task": "eventferry.purge_task_results",
                                          "schedule": 3600.0,
                                          "kwargs": {"older_than": "30d"}},
        "eventferry-archive": {"task": "eventferry.archive", "schedule": 86400.0,
                               "kwargs": {"to": "s3a://history/outbox", "purge": True}},
    }
"""

from __future__ import annotations

import os
from typing import Any

from celery import shared_task

from .history.archive import ArchiveRequest, archive
from .maintenance import parse_duration, purge, purge_inbox, purge_task_results
from .relay import Relay, RelayConfig
from .task_messages import RUNNER_TASK


@shared_task(name="eventferry.relay", ignore_result=True)  # type: ignore[untyped-decorator]
def relay(max_events: int = 10_000, batch_size: int | None = None) -> dict[str, Any]:
    """Relay until nothing is claimable or ``max_events`` were claimed, then return, so
    one slow run cannot hold a worker forever; beat starts the next."""
    stats = Relay(RelayConfig.from_settings(
        batch_size=batch_size, until_empty=True, max_events=max_events
    )).run()
    return {"published": stats.published, "retried": stats.retried, "dead": stats.dead,
            "released": stats.released, "errors": stats.errors}


@shared_task(name="eventferry.purge", ignore_result=True)  # type: ignore[untyped-decorator]
def purge_closed(older_than: str = "7d", status: str = "done", batch_size: int = 1000,
                 max_rows: int | None = None) -> int:
    """Delete closed rows older than ``older_than`` (a duration such as ``"7d"``)."""
    return purge(parse_duration(older_than), status=status, batch_size=batch_size,
                 max_rows=max_rows).rows


@shared_task(name="eventferry.purge_inbox", ignore_result=True)  # type: ignore[untyped-decorator]
def purge_inbox_records(older_than: str = "30d", consumer: str | None = None,
                        batch_size: int = 1000, max_rows: int | None = None) -> int:
    """Delete inbox records of messages handled longer than ``older_than`` ago."""
    return purge_inbox(parse_duration(older_than), consumer=consumer, batch_size=batch_size,
                       max_rows=max_rows).rows


@shared_task(name="eventferry.purge_task_results", ignore_result=True)  # type: ignore[untyped-decorator]
def purge_finished_task_results(older_than: str = "30d", batch_size: int = 1000,
                                max_rows: int | None = None) -> int:
    """Delete the results of Django tasks that finished longer than ``older_than`` ago."""
    return purge_task_results(parse_duration(older_than), batch_size=batch_size,
                              max_rows=max_rows).rows


@shared_task(name="eventferry.archive", ignore_result=True)  # type: ignore[untyped-decorator]
def archive_closed(to: str, older_than: str = "7d", status: str = "done", purge: bool = False,
                   partitions: int | None = None, master: str | None = None) -> dict[str, Any]:
    """Archive closed rows older than ``older_than`` to Parquet at ``to`` with Spark, as
    ``manage.py outbox_archive`` does; with ``purge``, then delete the archived rows.
    Errors propagate (a busy archive raises ``ArchiveBusy``), so Celery records them."""
    result = archive(ArchiveRequest(path=to, older_than=parse_duration(older_than),
                                    status=status, purge=purge, partitions=partitions,
                                    master=master))
    return {"run_id": result.run_id, "archived": result.archived, "purged": result.purged,
            "resumed": result.resumed, "summary": result.summary()}


@shared_task(bind=True, name=RUNNER_TASK, acks_late=True, reject_on_worker_lost=True,
             ignore_result=True)  # type: ignore[untyped-decorator]
def run_django_task(self: Any, payload: dict[str, Any]) -> str:
    """Run the Django task of an outbox task row once per result id (the Celery task id)
    and record its result; see :mod:`eventferry_django.task_runner`. Acked late and
    requeued when its worker dies, so a task whose worker was killed runs again.

    When the database cannot record the result (it is down: the task's own exceptions
    are its result), the message is sent again with the same id after a pause doubling
    up to a minute, for as long as that lasts: the task stays READY or RUNNING meanwhile,
    and the inbox keeps a run whose commit did get through from running twice."""
    from django.db import Error

    from .task_runner import run

    worker_id = f"{self.request.hostname or 'celery'}:{os.getpid()}"
    try:
        return run(self.request.id, payload, worker_id).value
    except Error as exc:
        raise self.retry(exc=exc, countdown=min(60, 2 ** self.request.retries),
                         max_retries=None) from exc
