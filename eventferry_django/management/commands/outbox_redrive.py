"""``manage.py outbox_redrive``: send dead (and, if asked, failed) events again."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...exceptions import EventferryError
from ...maintenance import RedriveSelection, redrive
from ._arguments import add_database_argument, database_alias, int_range, moment
from ._base import EventferryCommand


class Command(EventferryCommand):
    help = (
        "Move dead outbox events (with --include-failed, failed ones too) back to pending, "
        "resetting attempts, retry time and error. Filters combine with AND; give at least one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--id", dest="ids", type=int_range(1), nargs="+", default=[],
                            metavar="ID", help="Row ids.")
        parser.add_argument("--topic", help="Events of this topic.")
        parser.add_argument("--aggregate-id", help="Events of this aggregate id.")
        parser.add_argument("--since", type=moment,
                            help="Created at or after: ISO date-time, or a duration ago (2d).")
        parser.add_argument("--until", type=moment,
                            help="Created before: ISO date-time, or a duration ago.")
        parser.add_argument("--error-contains", help="Events whose last error contains this text.")
        parser.add_argument("--include-failed", action="store_true",
                            help="Also redrive failed rows waiting for a retry.")
        parser.add_argument("--dry-run", action="store_true",
                            help="Show what would move; change nothing.")
        add_database_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        alias = database_alias(options)
        selection = RedriveSelection(
            ids=options["ids"], topic=options["topic"], aggregate_id=options["aggregate_id"],
            since=options["since"], until=options["until"],
            error_contains=options["error_contains"], include_failed=options["include_failed"],
        )
        if selection.since and selection.until and selection.since >= selection.until:
            raise CommandError("--since must be earlier than --until.")
        try:
            result = redrive(selection, dry_run=options["dry_run"], using=alias)
        except EventferryError as exc:
            raise CommandError(str(exc)) from exc
        if not result.dry_run:
            self.stdout.write(f"Redrove {result.rows:,} event(s).")
            return
        self.stdout.write(f"Would redrive {result.rows:,} event(s).")
        for event in result.sample:
            self.stdout.write(
                f"  #{event.id} {event.topic} {event.aggregate_type}/{event.aggregate_id} "
                f"{event.get_status_display()} attempts={event.attempts}: {event.last_error or ''}"
            )
        if result.rows > len(result.sample):
            self.stdout.write(f"  ... and {result.rows - len(result.sample):,} more")
