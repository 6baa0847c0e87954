"""Arguments shared by the management commands: argparse ``type=`` validators and the
handling of defaults that come from ``EVENTFERRY``."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import connections
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from ...conf import DEFAULTS, get_settings
from ...exceptions import EventferryError
from ...maintenance import DURATION_PATTERN, parse_duration, utc_ago


def setting_default(key: str) -> str:
    """How a help text names a default that comes from ``EVENTFERRY``. The parser is
    built before the system checks run, so the setting itself is not read there."""
    return f"EVENTFERRY['{key}'], {DEFAULTS[key]} unless set"


def add_database_argument(parser: CommandParser) -> None:
    parser.add_argument("--database", default=None,
                        help="Database alias of the outbox (default: EVENTFERRY['DATABASE']).")


def database_alias(options: dict[str, Any]) -> str:
    """The ``--database`` alias, or the outbox's; an unknown alias is a CommandError."""
    alias: str = options["database"] or get_settings().database
    if alias not in connections:
        raise CommandError(f"Unknown database alias {alias!r}.")
    return alias


def int_range(low: int, high: int | None = None) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            bounds = f"{low}..{high:,}" if high is not None else f"at least {low}"
            raise argparse.ArgumentTypeError(f"{value} is out of range ({bounds})")
        return value

    return parse


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive number of seconds")
    return value


def duration(text: str) -> dt.timedelta:
    try:
        return parse_duration(text)
    except EventferryError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def moment(text: str) -> dt.datetime:
    """An ISO 8601 date-time (UTC when it has no offset), or a duration ago (``2h``)."""
    if DURATION_PATTERN.match(text):
        return utc_ago(duration(text))
    parsed = parse_datetime(text)
    if parsed is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither an ISO 8601 date-time (2026-11-21T08:00) nor a duration "
            "ago (90m, 2d)"
        )
    return parsed if timezone.is_aware(parsed) else parsed.replace(tzinfo=dt.UTC)
