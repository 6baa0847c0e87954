"""``manage.py outbox_report``: delivery figures per topic and hour, as a web page with
plots and a CSV, from the archive or live from the outbox table."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from ...history.report import ReportRequest, report
from ._arguments import add_database_argument, database_alias, int_range
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
        "Write index.html, PNG plots and figures.csv to --out: per topic and hour, events, "
        "delivery latency p50/p95/p99 (created -> processed), attempts distribution and "
        "dead events by error. " + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--from", dest="path", metavar="PATH",
                            help="Archive root written by outbox_archive.")
        source.add_argument("--live", action="store_true",
                            help="Read the outbox table itself through Spark's JDBC source.")
        parser.add_argument("--out", required=True, metavar="DIR",
                            help="Directory for index.html, the plots and figures.csv.")
        add_window_arguments(parser)
        parser.add_argument("--partitions", type=int_range(1, 10_000),
                            help="Parallel JDBC reads with --live (default: Spark's cores).")
        add_spark_arguments(parser)
        add_database_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        check_window(options)
        request = ReportRequest(
            out=options["out"], path=options["path"], since=options["since"],
            until=options["until"], master=options["master"],
            partitions=options["partitions"], using=database_alias(options),
        )
        with exit_codes():
            figures = report(request, progress_printer(self.stdout, options["verbosity"]))
        self.stdout.write(
            f"Reported {figures.events:,} event(s) over {len(figures.topics)} topic(s) "
            f"and {len({d.hour for d in figures.hours})} hour(s) to {options['out']}/index.html."
        )
