"""Renamed to :mod:`eventferry_django.maintenance` (operator actions: purge, redrive,
delete dead rows); this name stays for one release so existing imports keep working."""

from __future__ import annotations

import warnings

from .maintenance import (
    DURATION_PATTERN,
    PURGE_STATUSES,
    PurgeResult,
    RedriveResult,
    RedriveSelection,
    delete_dead,
    parse_duration,
    purge,
    purge_inbox,
    redrive,
    utc_ago,
)

warnings.warn("eventferry_django.operations is now eventferry_django.maintenance",
              DeprecationWarning, stacklevel=2)

__all__ = ["DURATION_PATTERN", "PURGE_STATUSES", "PurgeResult", "RedriveResult",
           "RedriveSelection", "delete_dead", "parse_duration", "purge", "purge_inbox",
           "redrive", "utc_ago"]
