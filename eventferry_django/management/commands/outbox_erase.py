"""``manage.py outbox_erase``: forget one aggregate's events, in the archive on disk
and in the outbox (and, if asked, the inbox)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from ...history.erasure import ErasureRequest, erase
from ._arguments import add_database_argument, database_alias
from ._base import EventferryCommand
from ._history import EXIT_CODES_HELP, add_spark_arguments, exit_codes, progress_printer


class Command(EventferryCommand):
    help = (
        "Remove an aggregate's events from the archive at --from (a Delta table: delete "
        "and vacuum; Parquet: the files holding them are rewritten), its delivered and "
        "dead rows from the outbox and, with --inbox, the inbox's records of their message "
        "ids. The erasure log in the archive keeps when, which key and how many rows, "
        "never a payload. Running it again after a crash finishes it. " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--from", dest="path", required=True, metavar="PATH",
                            help="Archive root written by outbox_archive.")
        parser.add_argument("--aggregate-id", required=True, metavar="ID",
                            help="The aggregate whose events to erase.")
        parser.add_argument("--aggregate-type", metavar="TYPE",
                            help="Only events of this aggregate type (default: any type).")
        parser.add_argument("--inbox", action="store_true",
                            help="Also delete the inbox's records of the erased message ids.")
        parser.add_argument("--dry-run", action="store_true",
                            help="Print what would be erased; change nothing.")
        add_spark_arguments(parser)
        add_database_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["aggregate_id"].strip():
            raise CommandError("--aggregate-id must not be empty.")
        request = ErasureRequest(
            path=options["path"], aggregate_id=options["aggregate_id"],
            aggregate_type=options["aggregate_type"], inbox=options["inbox"],
            dry_run=options["dry_run"], master=options["master"],
            using=database_alias(options),
        )
        with exit_codes():
            result = erase(request, progress_printer(self.stdout, options["verbosity"]))
        for finished in result.finished:
            self.stdout.write(f"Finished erasure {finished.erasure_id} first: "
                              f"{finished.describe()}.")
        self.stdout.write(result.summary())
