"""Scheduled delivery: when an event published with ``deliver_at`` or ``delay`` may go.

A scheduled event is written as a pending row whose ``next_retry_at`` is its delivery
time. The claim already leaves a pending row with a future ``next_retry_at`` alone until
the database's clock passes it, and the claim index ``(status, next_retry_at, id)`` keeps
such rows outside the ranges the claim scans, so a row scheduled days ahead costs a relay
nothing per pass. Nothing else writes a pending row with a retry time: a failed row is
status 3, a claim or a hand-back writes nothing to its rows, and a redrive clears
``next_retry_at``. So "pending with a ``next_retry_at``" means scheduled, and "scheduled
and not yet due" is ``next_retry_at`` after the database's now.

The database's clock decides, as it does for retries: ``deliver_at`` is an instant,
stored as given (in UTC) and compared with the database's now; ``delay`` is added to the
database's now by the INSERT itself, so the application's clock is never in the loop.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from .exceptions import InvalidEvent

#: The furthest ahead an event may be scheduled: a hundred years, well inside every
#: vendor's timestamp range.
MAX_DELAY = dt.timedelta(days=36_525)

_MILLISECOND = dt.timedelta(milliseconds=1)


@dataclass(frozen=True)
class Delivery:
    """When a scheduled event may be delivered: at ``at`` (aware, UTC, whole
    milliseconds) or ``delay_ms`` after the INSERT, by the database's clock."""

    at: dt.datetime | None = None
    delay_ms: int | None = None


def delivery(deliver_at: Any, delay: Any, prefix: str = "") -> Delivery | None:
    """The :class:`Delivery` that ``deliver_at`` or ``delay`` ask for; None for an
    event to deliver now (neither given, or a delay of zero or less). Raises
    :class:`InvalidEvent` naming the field for anything else."""
    if deliver_at is not None and delay is not None:
        raise InvalidEvent(
            f"{prefix}deliver_at, {prefix}delay: give one of them, not both "
            "(deliver_at is an instant, delay a timedelta from now)."
        )
    if deliver_at is not None:
        return Delivery(at=_instant(deliver_at, f"{prefix}deliver_at"))
    if delay is not None:
        milliseconds = _milliseconds(delay, f"{prefix}delay")
        return Delivery(delay_ms=milliseconds) if milliseconds > 0 else None
    return None


def _instant(value: Any, field: str) -> dt.datetime:
    if not isinstance(value, dt.datetime):
        raise InvalidEvent(f"{field}: must be a timezone-aware datetime, got {value!r}.")
    if timezone.is_naive(value):
        raise InvalidEvent(
            f"{field}: {value.isoformat()} is naive; give a timezone-aware datetime "
            "(e.g. datetime.now(UTC) + timedelta(hours=1)) so that no time zone is guessed."
        )
    try:
        utc = value.astimezone(dt.UTC)
        late = utc > dt.datetime.now(dt.UTC) + MAX_DELAY
    except OverflowError:
        late = True
    if late:
        raise InvalidEvent(f"{field}: {value.isoformat()} is more than {MAX_DELAY.days:,} "
                           "days ahead.")
    # Whole milliseconds, rounded up: every vendor keeps milliseconds, and a time
    # rounded down could let the event out before it.
    spare = utc.microsecond % 1000
    return utc + dt.timedelta(microseconds=1000 - spare) if spare else utc


def _milliseconds(value: Any, field: str) -> int:
    if not isinstance(value, dt.timedelta):
        raise InvalidEvent(f"{field}: must be a datetime.timedelta, got {value!r}.")
    if value > MAX_DELAY:
        raise InvalidEvent(f"{field}: {value} is more than {MAX_DELAY.days:,} days.")
    return math.ceil(value / _MILLISECOND)
