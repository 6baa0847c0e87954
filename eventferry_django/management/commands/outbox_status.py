"""``manage.py outbox_status``: backlog by status and topic, dead rows, the oldest pending
event and the last publication (the queries live in ``eventferry_django.status``)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django.core.management.base import CommandParser

from ...status import TOPIC_COLUMNS, OutboxStatus, outbox_status
from ._arguments import add_database_argument, database_alias
from ._base import EventferryCommand


class Command(EventferryCommand):
    help = (
        "Show the outbox backlog (pending, claimed, failed) by status and by topic, dead "
        "rows, the age of the oldest pending event and when the last one was published. "
        "Done rows are never counted, so it stays fast on a large table."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--json", action="store_true",
            help="Print one JSON object with stable keys instead of a table "
            "(default: a table).",
        )
        add_database_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        status = outbox_status(database_alias(options), by_topic=True)
        if options["json"]:
            self.stdout.write(json.dumps(status.as_dict(), indent=2, sort_keys=True))
        else:
            self.stdout.write(render(status))


def render(status: OutboxStatus) -> str:
    """The human-readable table."""
    lines = [f"Outbox on database {status.database!r}, "
             f"{status.checked_at.isoformat(timespec='seconds')}"]
    width = max(len(name) for name in (*status.backlog, "dead"))
    for name, count in status.backlog.items():
        lines.append(f"  {name:<{width}}  {count:>12,}")
    lines.append(f"  {'dead':<{width}}  {status.dead:>12,}")
    lines.append("")
    lines.append("  oldest pending   " + _when(status.oldest_pending_created_at,
                                              status.oldest_pending_age_seconds, "none"))
    lines.append("  oldest claimable " + _when(status.oldest_claimable_since,
                                              status.oldest_claimable_age_seconds, "none"))
    lines.append("  last published   " + _when(status.last_published_at,
                                              status.last_published_age_seconds, "never"))
    topics = status.by_topic or {}
    if topics:
        topic_width = max(5, *(len(topic) for topic in topics))
        lines.append("")
        lines.append(f"  {'topic':<{topic_width}}"
                     + "".join(f"  {column:>10}" for column in TOPIC_COLUMNS))
        for topic, counts in topics.items():
            lines.append(f"  {topic:<{topic_width}}"
                         + "".join(f"  {counts[column]:>10,}" for column in TOPIC_COLUMNS))
    return "\n".join(lines)


def _when(moment: dt.datetime | None, age: float | None, missing: str) -> str:
    if moment is None or age is None:
        return missing
    return f"{moment.isoformat(timespec='seconds')} ({_duration(age)} ago)"


def _duration(seconds: float) -> str:
    """``42s``, ``3m 07s``, ``5h 02m``, ``2d 04h``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours:02d}h"
