"""``manage.py outbox_replay``: a slice of the committed archive back into the outbox."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...history.replay import ORIGINAL_ID_HEADER, REPLAY_ID_HEADER, ReplayRequest, replay
from ...maintenance import PURGE_STATUSES
from ._arguments import add_database_argument, database_alias
from ._base import EventferryCommand
from ._history import (
    EXIT_CODES_HELP,
    add_spark_arguments,
    add_window_arguments,
    check_window,
    exit_codes,
    progress_printer,
)


class Command(EventferryCommand):
    help = (
        "Re-enqueue archived events into the outbox, per aggregate in their original order, "
        "with new message ids derived from the original ones and the replay id; headers "
        f"{REPLAY_ID_HEADER} and {ORIGINAL_ID_HEADER} say what they are. Running the "
        "identical replay again inserts nothing. " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="path", required=True, metavar="PATH",
                            help="Archive root written by outbox_archive.")
        parser.add_argument("--topic", dest="topics", action="append", default=[],
                            metavar="TOPIC", help="Only this topic; repeat for several.")
        parser.add_argument("--aggregate-id", help="Only this aggregate id.")
        add_window_arguments(parser)
        parser.add_argument("--status", choices=sorted(PURGE_STATUSES), default="done",
                            help="Archived outcomes to replay (default: %(default)s).")
        parser.add_argument("--replay-id", help="Name this replay (default: derived from the "
                            "selected events, so the identical selection is the same replay).")
        parser.add_argument("--dry-run", action="store_true",
                            help="Print what would be replayed, per topic; insert nothing.")
        add_spark_arguments(parser)
        add_database_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        check_window(options)
        if options["replay_id"] is not None and not options["replay_id"].strip():
            raise CommandError("--replay-id must not be empty.")
        request = ReplayRequest(
            path=options["path"], topics=tuple(options["topics"]),
            aggregate_id=options["aggregate_id"], since=options["since"],
            until=options["until"], status=options["status"],
            replay_id=options["replay_id"], dry_run=options["dry_run"],
            master=options["master"], using=database_alias(options),
        )
        with exit_codes():
            result = replay(request, progress_printer(self.stdout, options["verbosity"]))
        for topic, events in result.selected.items():
            self.stdout.write(f"  {topic}  {events:,}")
        self.stdout.write(result.summary())
