"""Operator actions shared by every face: management commands, the admin and Celery
tasks call these, so redrive from the admin and from ``outbox_redrive`` cannot drift."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from .conf import get_settings
from .contract import CLOSED, DEAD, DONE
from .exceptions import EventferryError
from .models import InboxMessage, OutboxEvent, OutboxEventQuerySet, Status
from .signals import events_redriven
from .store.inbox import InboxStore
from .store.outbox import OutboxStore

DURATION_PATTERN = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
#: The longest duration accepted. Any cutoff that far back lies before the first outbox
#: row, and every vendor can still bind it (MySQL's DATETIME starts at the year 1000).
MAX_DURATION_DAYS = 36_500
_MAX_DURATION_SECONDS = MAX_DURATION_DAYS * _UNIT_SECONDS["d"]


def parse_duration(text: str) -> dt.timedelta:
    """``0s``, ``90m``, ``12h``, ``30d``, ``2w`` as a timedelta, at most
    :data:`MAX_DURATION_DAYS`."""
    match = DURATION_PATTERN.match(text or "")
    if not match:
        raise EventferryError(
            f"{text!r} is not a duration; use a whole number and a unit: "
            "s, m, h, d or w (e.g. 30s, 90m, 12h, 7d)."
        )
    digits, unit = match[1].lstrip("0") or "0", match[2]
    # A dozen digits are past the limit in any unit; int() of thousands would be slow.
    seconds = int(digits) * _UNIT_SECONDS[unit] if len(digits) <= 12 else None
    if seconds is None or seconds > _MAX_DURATION_SECONDS:
        raise EventferryError(
            f"{text!r} is longer than the largest duration accepted, {MAX_DURATION_DAYS}d "
            f"({MAX_DURATION_DAYS // 365} years)."
        )
    return dt.timedelta(seconds=seconds)


def utc_ago(duration: dt.timedelta) -> dt.datetime:
    """That long before now, in UTC: the clock of every timestamp column, whatever
    ``USE_TZ`` says (``timezone.now()`` is local wall time when it is False)."""
    return dt.datetime.now(dt.UTC) - duration


#: What ``outbox_purge --status`` (and the archive's, the replay's) may delete, by name.
PURGE_STATUSES: dict[str, tuple[int, ...]] = {"done": (DONE,), "dead": (DEAD,), "both": CLOSED}


def _events(using: str | None) -> OutboxEventQuerySet:
    return OutboxEvent.objects.using(using or get_settings().database)


@dataclass(frozen=True)
class PurgeResult:
    rows: int
    cutoff: dt.datetime
    dry_run: bool


def purge(
    older_than: dt.timedelta,
    *,
    status: str = "done",
    batch_size: int = 1000,
    max_rows: int | None = None,
    dry_run: bool = False,
    using: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> PurgeResult:
    """Delete done (``status="dead"``/``"both"``: also dead) rows processed longer than
    ``older_than`` ago. Pending, claimed and failed rows are never touched."""
    if status not in PURGE_STATUSES:
        raise EventferryError(f"status must be one of {', '.join(PURGE_STATUSES)}, "
                              f"got {status!r}.")
    statuses = PURGE_STATUSES[status]
    cutoff = utc_ago(older_than)
    store = OutboxStore(using)
    if dry_run:
        return _counted(_events(using).filter(status__in=statuses,
                                              processed_at__lt=store.utc_value(cutoff)),
                        cutoff, max_rows)
    rows = store.purge(
        cutoff, statuses=statuses, batch_size=batch_size, max_rows=max_rows, progress=progress
    )
    return PurgeResult(rows, cutoff, False)


def purge_inbox(
    older_than: dt.timedelta,
    *,
    consumer: str | None = None,
    batch_size: int = 1000,
    max_rows: int | None = None,
    dry_run: bool = False,
    using: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> PurgeResult:
    """Forget the messages consumers handled longer than ``older_than`` ago (of
    ``consumer`` only, if given). A message delivered again after its record is gone is
    handled again: keep records longer than any redelivery can take."""
    cutoff = utc_ago(older_than)
    store = InboxStore(using)
    if dry_run:
        records = InboxMessage.objects.using(store.alias).filter(
            handled_at__lt=store.utc_value(cutoff))
        if consumer is not None:
            records = records.filter(consumer=consumer)
        return _counted(records, cutoff, max_rows)
    rows = store.purge(cutoff, consumer=consumer, batch_size=batch_size,
                       max_rows=max_rows, progress=progress)
    return PurgeResult(rows, cutoff, False)


def purge_task_results(
    older_than: dt.timedelta,
    *,
    batch_size: int = 1000,
    max_rows: int | None = None,
    dry_run: bool = False,
    using: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> PurgeResult:
    """Delete the results of Django tasks that finished (successfully or not) longer
    than ``older_than`` ago; READY and RUNNING results are never touched. A task is
    never run again for it: its outbox row and inbox record say so, if still kept."""
    from .task_results import TaskResultStore

    # The results table is written through the ORM, in Django's time convention.
    cutoff = timezone.now() - older_than
    rows = TaskResultStore(using or get_settings().database).purge(
        cutoff, batch_size=batch_size, max_rows=max_rows, dry_run=dry_run, progress=progress)
    return PurgeResult(rows, cutoff, dry_run)


def _counted(rows: QuerySet[Any], cutoff: dt.datetime, max_rows: int | None) -> PurgeResult:
    """A dry run's result: what a purge of ``rows`` would delete, up to the soft cap."""
    count = rows.count()
    return PurgeResult(count if max_rows is None else min(count, max_rows), cutoff, True)


@dataclass(frozen=True)
class RedriveSelection:
    """Which dead (and optionally failed) rows to move back to pending; filters combine
    with AND, and at least one must be given."""

    ids: Sequence[int] = ()
    topic: str | None = None
    aggregate_id: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    error_contains: str | None = None
    include_failed: bool = False

    def query(self, utc: Callable[[dt.datetime], dt.datetime]) -> Q:
        """The filter; ``utc`` turns ``since`` and ``until`` into what the UTC column
        compares with (:meth:`~eventferry_django.store.bound.BoundStore.utc_value`)."""
        filters = {
            "id__in": list(self.ids) or None,
            "topic": self.topic,
            "aggregate_id": self.aggregate_id,
            "created_at__gte": None if self.since is None else utc(self.since),
            "created_at__lt": None if self.until is None else utc(self.until),
            "last_error__contains": self.error_contains,
        }
        given = {k: v for k, v in filters.items() if v is not None}
        if not given:
            raise EventferryError("Say which events to redrive: ids, a topic, an aggregate "
                                  "id, a time range or error text.")
        return Q(**given)

    @property
    def statuses(self) -> tuple[Status, ...]:
        return (Status.DEAD, Status.FAILED) if self.include_failed else (Status.DEAD,)


@dataclass(frozen=True)
class RedriveResult:
    rows: int
    dry_run: bool
    sample: list[OutboxEvent]


def redrive(
    selection: RedriveSelection,
    *,
    dry_run: bool = False,
    using: str | None = None,
    sample_size: int = 20,
) -> RedriveResult:
    """Move the selected rows back to pending with attempts, retry time and error reset.

    The status condition is part of the UPDATE itself, so a row a relay claims meanwhile
    is left alone.
    """
    utc = OutboxStore(using).utc_value
    selected = _events(using).filter(selection.query(utc), status__in=selection.statuses)
    if dry_run:
        return RedriveResult(selected.count(), True, list(selected.order_by("id")[:sample_size]))
    rows = selected.update(
        status=Status.PENDING, attempts=0, next_retry_at=None, last_error=None,
        claimed_at=None, processed_at=None,
    )
    if rows:
        events_redriven.send(sender=OutboxEvent, count=rows, using=using or get_settings().database)
    return RedriveResult(rows, False, [])


def delete_dead(ids: Sequence[int], *, using: str | None = None) -> int:
    """Delete these rows if they are still dead. The status condition is part of the
    DELETE itself, so a row redriven meanwhile survives."""
    if not ids:
        return 0
    deleted, _ = _events(using).dead().filter(id__in=list(ids)).delete()
    return deleted
