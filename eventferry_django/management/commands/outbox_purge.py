"""``manage.py outbox_purge``: delete old done (and, if asked, dead) outbox rows, or with
``--inbox`` old records of handled messages, or with ``--task-results`` the results of
Django tasks that finished long ago."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...contract import MAX_BATCH
from ...maintenance import (
    PURGE_STATUSES,
    PurgeResult,
    purge,
    purge_inbox,
    purge_task_results,
)
from ._arguments import add_database_argument, database_alias, duration, int_range
from ._base import EventferryCommand


class Command(EventferryCommand):
    help = (
        "Delete done outbox rows (and dead ones with --status dead/both) processed longer "
        "ago than --older-than, in batches. Pending, claimed and failed rows are never "
        "deleted. With --inbox, delete the inbox's records of messages handled longer ago "
        "instead; with --task-results, the results of Django tasks that finished longer ago."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than", type=duration, required=True,
            help="Age of the rows to delete, by processed time (with --inbox: by handled "
            "time): e.g. 0s, 90m, 12h, 7d.",
        )
        parser.add_argument("--status", choices=sorted(PURGE_STATUSES),
                            help="Which closed outbox rows to delete (default: done).")
        parser.add_argument(
            "--inbox", action="store_true",
            help="Purge the inbox (consumers' records of handled messages) instead of the "
            "outbox. A message redelivered after its record is gone is handled again.",
        )
        parser.add_argument(
            "--task-results", action="store_true",
            help="Purge the results of Django tasks (OutboxTaskBackend) that finished, "
            "successfully or not, longer ago instead; ready and running ones are kept.",
        )
        parser.add_argument("--consumer",
                            help="With --inbox: only this consumer's records (default: all).")
        parser.add_argument(
            "--batch-size", type=int_range(1, MAX_BATCH), default=1000,
            help="Rows deleted per statement (default: %(default)s; above 5,000 SQL Server "
            "may escalate to a table lock).",
        )
        parser.add_argument(
            "--max-rows", type=int_range(1),
            help="Soft cap: stop after the batch that passes it (default: no cap).",
        )
        parser.add_argument("--dry-run", action="store_true",
                            help="Count what would be deleted; delete nothing.")
        add_database_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        alias = database_alias(options)
        last_report = time.monotonic()

        def progress(deleted: int) -> None:
            nonlocal last_report
            if options["verbosity"] >= 1 and time.monotonic() - last_report >= 1.0:
                self.stdout.write(f"  ... {deleted:,} rows deleted so far")
                last_report = time.monotonic()

        common = dict(batch_size=options["batch_size"], max_rows=options["max_rows"],
                      dry_run=options["dry_run"], using=alias, progress=progress)
        result: PurgeResult
        if options["inbox"] and options["task_results"]:
            raise CommandError("--inbox and --task-results purge different tables; pick one.")
        if options["task_results"]:
            if options["status"] is not None or options["consumer"] is not None:
                raise CommandError("--task-results purges by finish time alone; drop "
                                   "--status and --consumer.")
            result = purge_task_results(options["older_than"], **common)
            what = "task result(s) finished"
        elif options["inbox"]:
            if options["status"] is not None:
                raise CommandError("--status selects outbox rows; --inbox purges by handled "
                                   "time alone.")
            result = purge_inbox(options["older_than"], consumer=options["consumer"], **common)
            what = "inbox record(s) of messages handled"
        else:
            if options["consumer"] is not None:
                raise CommandError("--consumer needs --inbox.")
            status = options["status"] or "done"
            result = purge(options["older_than"], status=status, **common)
            what = f"{status} row(s) processed"
        verb = "Would delete" if result.dry_run else "Deleted"
        self.stdout.write(
            f"{verb} {result.rows:,} {what} before "
            f"{result.cutoff.isoformat(timespec='seconds')}."
        )
