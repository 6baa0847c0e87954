"""``manage.py outbox_archive``: closed outbox rows to Parquet or a Delta table with
Spark, verified and committed; with ``--purge``, then deleted from the outbox; with
``--compact``, a Delta table's small files merged."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.management.base import CommandError, CommandParser, OutputWrapper

from ...contract import MAX_BATCH, STATUS_NAMES
from ...history.archive import (
    DEFAULT_PURGE_BATCH,
    DEFAULT_PURGE_RANGE,
    MAX_PURGE_RANGE,
    ArchiveRequest,
    archive,
)
from ...history.delta import DEFAULT_COMPACT_TARGET_BYTES
from ...history.errors import EXIT_USAGE
from ...history_settings import ARCHIVE_FORMATS
from ...maintenance import PURGE_STATUSES
from ...store.limits import SQL_SERVER_DELETE_ROWS
from ._arguments import add_database_argument, database_alias, duration, int_range
from ._base import EventferryCommand
from ._history import EXIT_CODES_HELP, add_spark_arguments, exit_codes, progress_printer

MEGABYTE = 1024 * 1024


class Command(EventferryCommand):
    help = (
        "Archive done (and, with --status, dead) outbox rows processed longer ago than "
        "--older-than to Parquet runs or (--format delta) a Delta table at --to, "
        "partitioned by topic and day; with --purge, "
        "delete exactly the archived rows from the outbox once the archive is verified. "
        + EXIT_CODES_HELP
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--to", required=True, metavar="PATH",
                            help="Archive root: a directory, hdfs://..., s3a://...")
        parser.add_argument("--older-than", type=duration, default=dt.timedelta(days=7),
                            help="Archive rows processed longer ago than this, by the "
                            "database's clock: e.g. 12h, 7d (default: 7d).")
        parser.add_argument("--status", choices=sorted(PURGE_STATUSES), default="done",
                            help="Which closed rows to archive (default: %(default)s).")
        parser.add_argument("--purge", action="store_true",
                            help="After the archive is verified, delete the archived rows "
                            "from the outbox (and finish purges earlier runs left undone).")
        parser.add_argument("--partitions", type=int_range(1, 10_000),
                            help="Parallel JDBC reads, each an id range (default: the cores "
                            "Spark has, more above 500,000 rows each).")
        parser.add_argument("--purge-range-size", type=int_range(1, MAX_PURGE_RANGE),
                            metavar="IDS",
                            help="The purge goes one range of this many ids at a time: "
                            "one DELETE where the range's rows match the archive's count "
                            "and checksum, its archived keys otherwise; SQL Server's are at "
                            f"most {SQL_SERVER_DELETE_ROWS:,} ids (default: "
                            f"{DEFAULT_PURGE_RANGE:,}).")
        parser.add_argument("--purge-batch-size", type=int_range(1, MAX_BATCH),
                            metavar="ROWS",
                            help="Rows deleted per purge statement; SQL Server's are at most "
                            f"{SQL_SERVER_DELETE_ROWS:,} whatever this says (default: "
                            f"{DEFAULT_PURGE_BATCH}).")
        parser.add_argument("--batch-size", type=int_range(1, MAX_BATCH), metavar="N",
                            help="Deprecated: --purge-range-size N --purge-batch-size N.")
        parser.add_argument("--format", choices=ARCHIVE_FORMATS,
                            help="parquet: Parquet runs with manifests; delta: a Delta Lake "
                            "table, one commit per run (default: "
                            "EVENTFERRY['ARCHIVE_FORMAT'], parquet unless set).")
        parser.add_argument("--compact", action="store_true",
                            help="After the run, merge each partition's small files into "
                            "files of about --compact-target-size, as one Delta commit "
                            "(Delta archives only).")
        parser.add_argument("--compact-target-size", type=int_range(1, 16_384), metavar="MB",
                            default=DEFAULT_COMPACT_TARGET_BYTES // MEGABYTE,
                            help="File size compaction aims at (default: %(default)s MB).")
        parser.add_argument("--dry-run", action="store_true",
                            help="Print what would be archived, per topic and status; "
                            "change nothing.")
        add_spark_arguments(parser)
        add_database_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        range_size, batch_size = purge_sizes(options, self.stderr)
        request = ArchiveRequest(
            path=options["to"], older_than=options["older_than"], status=options["status"],
            purge=options["purge"], partitions=options["partitions"],
            master=options["master"], dry_run=options["dry_run"],
            purge_range_size=range_size, purge_batch_size=batch_size,
            using=database_alias(options), format=options["format"],
            compact_target_bytes=(options["compact_target_size"] * MEGABYTE
                                  if options["compact"] else None),
        )
        with exit_codes():
            result = archive(request, progress_printer(self.stdout, options["verbosity"]))
        if result.dry_run:
            for stats in sorted(result.selected, key=lambda s: (s.topic, s.status)):
                self.stdout.write(f"  {stats.topic}  {STATUS_NAMES[stats.status]}  "
                                  f"{stats.rows:,}")
            for run_id in result.unpurged:
                self.stdout.write(f"  committed run {run_id} is not purged yet")
        self.stdout.write(result.summary())


def purge_sizes(options: dict[str, Any], stderr: OutputWrapper) -> tuple[int, int]:
    """``--purge-range-size`` and ``--purge-batch-size``, or both from the deprecated
    ``--batch-size``, which meant both (with a warning on stderr)."""
    old = options["batch_size"]
    range_size, batch_size = options["purge_range_size"], options["purge_batch_size"]
    if old is None:
        return range_size or DEFAULT_PURGE_RANGE, batch_size or DEFAULT_PURGE_BATCH
    if range_size is not None or batch_size is not None:
        raise CommandError("--batch-size is the old spelling of --purge-range-size and "
                           "--purge-batch-size together: give those two, not both spellings.",
                           returncode=EXIT_USAGE)
    stderr.write(f"DeprecationWarning: outbox_archive --batch-size is deprecated; it stands "
                 f"for --purge-range-size {old} --purge-batch-size {old}: use those.")
    return old, old
