"""Celery tasks: a relay pass and the purges, for projects that schedule with Celery
beat instead of running ``manage.py outbox_relay`` as a service. Import needs Celery.

    app.conf.beat_schedule = {
        "eventferry-relay": {"task": "eventferry.relay", "schedule": 5.0},
        "eventferry-purge": {"task": "eventferry.purge", "schedule": 3600.0,
                             "kwargs": {"older_than": "7d"}},
        "eventferry-purge-inbox": {"task": "eventferry.purge_inbox", "schedule": 3600.0,
                                   "kwargs": {"older_than": "30d"}},
    }
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from .operations import parse_duration, purge, purge_inbox
from .relay import Relay, RelayConfig


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
