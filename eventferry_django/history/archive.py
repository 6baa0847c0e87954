"""``outbox_archive``: closed outbox rows to Parquet, verified and committed, then (if
asked) purged from the outbox, exactly and only the rows archived.

One run:

1. **Lock** the archive path; remove what runs that never committed left behind.
2. **Resume**: with ``purge``, finish purging committed runs whose purge never finished.
3. **Freeze** the selection with one statement: the cutoff from the database's clock,
   the statuses, rows outside what committed runs hold, and the selection's
   ``MIN(id)``/``MAX(id)``, row count and id checksum. Rows can only leave such a
   selection afterwards (a closed row changes only by redrive, which stamps a later
   processed_at), so relays and purges running meanwhile cannot add to it.
4. **Read** it with Spark's JDBC source split into id ranges, and **write** Parquet
   partitioned by topic and day of processed_at to a staging directory.
5. **Verify** the staging read back (count and id checksum) against the freeze.
6. **Commit**: move staging into place and write the manifest, last; or, for a Delta
   table, commit the files as one Delta version (see :mod:`.run_tables`).
7. **Verify** the committed run as readers see it, per id range of ``purge_range_size``
   ids, then **purge** (with ``purge``) exactly the archived rows still closed, one range
   at a time: where the outbox's rows of the run's selection in a range have the
   archive's count and id checksum for it, one DELETE of that selection in that range
   takes them; elsewhere (rows left the selection after Spark read it, or were deleted)
   the archived (id, processed_at) pairs of the range are read back and deleted
   ``purge_batch_size`` rows a statement.

A crash before 6 leaves no commit: the next run removes the leftovers and archives the
same rows. A crash after 6 leaves a committed run: the next run does not archive its
rows again (they are inside its span) and, with ``purge``, finishes purging it.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import astuple, dataclass, field, replace
from itertools import takewhile
from typing import Any

from ..conf import get_settings
from ..contract import MAX_BATCH
from ..maintenance import PURGE_STATUSES
from ..store.closed_rows import (
    CHECKSUM_MODULI,
    ClosedRowSelection,
    SelectionStats,
    selection_checksum,
)
from ..store.limits import SQL_SERVER_DELETE_ROWS
from ..store.outbox import OutboxStore
from .compaction import CompactionResult, compact
from .errors import HistoryError, NotVerified
from .jdbc import JdbcSource, outbox_source
from .layout import new_run_id
from .manifest import Checksum, Manifest, PurgeRecord, archived_spans
from .run_tables import RunTable, run_table
from .session import spark_session, watch_tasks
from .source import read_outbox
from .storage import ArchiveFiles

Progress = Callable[[str], None]

#: Rows per purge statement: what SQL Server takes under its lock escalation threshold.
DEFAULT_PURGE_BATCH = SQL_SERVER_DELETE_ROWS
#: Ids per purge range: a range is one DELETE when its rows check out (at most
#: ``max_purge_range_ids`` on vendors that bound a statement's rows: SQL Server), and the
#: keys the driver holds at once when they do not.
DEFAULT_PURGE_RANGE = 100_000
#: The widest purge range: the driver holds a range's keys (two numbers a row) at once.
MAX_PURGE_RANGE = 1_000_000
DEFAULT_FETCH_SIZE = 10_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: Longest directory name most file systems allow, in bytes.
_MAX_NAME_BYTES = 255


@dataclass(frozen=True)
class ArchiveRequest:
    path: str
    older_than: dt.timedelta
    status: str = "done"
    purge: bool = False
    partitions: int | None = None
    master: str | None = None
    dry_run: bool = False
    purge_range_size: int = DEFAULT_PURGE_RANGE
    purge_batch_size: int = DEFAULT_PURGE_BATCH
    fetch_size: int = DEFAULT_FETCH_SIZE
    using: str | None = None
    #: ``parquet`` or ``delta``; None: ``EVENTFERRY["ARCHIVE_FORMAT"]``.
    format: str | None = None
    #: After the run, merge small files per partition into files of about this many
    #: bytes (a Delta archive only; see :mod:`.compaction`). None: no compaction.
    compact_target_bytes: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.purge_range_size <= MAX_PURGE_RANGE:
            raise HistoryError(f"purge_range_size must be 1..{MAX_PURGE_RANGE:,} ids, "
                               f"got {self.purge_range_size!r}.")
        if not 1 <= self.purge_batch_size <= MAX_BATCH:
            raise HistoryError(f"purge_batch_size must be 1..{MAX_BATCH:,} rows, "
                               f"got {self.purge_batch_size!r}.")

    @property
    def statuses(self) -> tuple[int, ...]:
        try:
            return PURGE_STATUSES[self.status]
        except KeyError:
            raise HistoryError(f"status must be one of {', '.join(PURGE_STATUSES)}, "
                               f"got {self.status!r}.") from None


@dataclass
class ArchiveResult:
    cutoff: dt.datetime
    dry_run: bool
    selected: list[SelectionStats] = field(default_factory=list)
    run_id: str | None = None
    archived: int = 0
    purged: int = 0
    purge_kept: int = 0
    resumed: list[str] = field(default_factory=list)
    unpurged: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    compaction: CompactionResult | None = None

    @property
    def selected_rows(self) -> int:
        return sum(s.rows for s in self.selected)

    def summary(self) -> str:
        when = self.cutoff.isoformat(timespec="seconds").replace("+00:00", "Z")
        if self.dry_run:
            text = f"Would archive {self.selected_rows:,} row(s) processed before {when}"
            if self.unpurged:
                text += f"; would purge {len(self.unpurged)} committed run(s) first"
            return text + "."
        text = (f"Archived {self.archived:,} row(s) processed before {when}"
                + (f" as run {self.run_id}" if self.run_id else ""))
        if self.resumed or self.purged or self.purge_kept:
            text += f"; purged {self.purged:,}"
            if self.purge_kept:
                text += f" ({self.purge_kept:,} archived row(s) had changed or were gone)"
            if self.resumed:
                text += f", finishing {len(self.resumed)} earlier run(s)"
        timings = ", ".join(f"{k} {v:.1f}s" for k, v in self.seconds.items())
        text += f" [{timings}]" if timings else ""
        return text + (f". {self.compaction.summary()}." if self.compaction else ".")


def _checksum(stats: Sequence[SelectionStats]) -> Checksum:
    return Checksum(*selection_checksum(stats))


def _total(checksums: Iterable[Checksum]) -> Checksum:
    parts = list(checksums)
    return Checksum(sum(c.rows for c in parts), sum(c.id_sum for c in parts),
                    sum(c.id_mix for c in parts))


def _topics(stats: Sequence[SelectionStats]) -> dict[str, int]:
    topics: dict[str, int] = {}
    for s in stats:
        topics[s.topic] = topics.get(s.topic, 0) + s.rows
    return topics


def _checksum_columns() -> list[Any]:
    """Spark aggregates of the id checksum, as the freeze computes it in SQL."""
    from pyspark.sql import functions as F

    first, second = CHECKSUM_MODULI
    return [
        F.count(F.lit(1)).alias("rows"),
        F.sum(F.col("id").cast("decimal(38,0)")).alias("id_sum"),
        F.sum(((F.col("id") % first) * (F.col("id") % second)).cast("decimal(38,0)"))
        .alias("id_mix"),
    ]


def _row_checksum(row: Any) -> Checksum:
    return Checksum(int(row["rows"]), int(row["id_sum"] or 0), int(row["id_mix"] or 0))


def truncate_to_milliseconds(value: dt.datetime) -> dt.datetime:
    """Every vendor keeps processed_at to the millisecond; so does the cutoff."""
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


@dataclass(frozen=True)
class Workspace:
    """What one archive run works with, all of it there before the run starts: the
    outbox (its store, its JDBC source), the statuses and the cutoff of the selection,
    the Spark session, and the archive's files."""

    store: OutboxStore
    source: JdbcSource
    statuses: tuple[int, ...]
    cutoff: dt.datetime
    spark: Any
    files: ArchiveFiles
    table: RunTable


@contextmanager
def open_workspace(request: ArchiveRequest) -> Iterator[Workspace]:
    """The workspace of ``request``, its Spark session open while the block runs. The
    arguments and settings are checked, and the cutoff taken from the database's clock,
    before Spark starts."""
    store = OutboxStore(request.using)
    statuses = request.statuses
    spark_settings = get_settings().spark
    source = outbox_source(store.alias)
    cutoff = truncate_to_milliseconds(store.utc_now() - request.older_than)
    with spark_session(source, spark_settings, request.master) as spark:
        files = ArchiveFiles(spark, request.path)
        table = run_table(spark, files, request.format or get_settings().archive_format)
        yield Workspace(store=store, source=source, statuses=statuses, cutoff=cutoff,
                        spark=spark, files=files, table=table)


class Archiver:
    """One archive run of ``request`` in ``workspace``."""

    def __init__(self, request: ArchiveRequest, workspace: Workspace,
                 progress: Progress | None = None) -> None:
        self.request = request
        self.progress: Progress = progress or (lambda message: None)
        self.store = workspace.store
        self.source = workspace.source
        self.statuses = workspace.statuses
        self.cutoff = workspace.cutoff
        self.spark = workspace.spark
        self.files = workspace.files
        self.table = workspace.table

    # -- the run -----------------------------------------------------------------------
    def run(self) -> ArchiveResult:
        result = ArchiveResult(cutoff=self.cutoff, dry_run=self.request.dry_run)
        if self.request.compact_target_bytes is not None and self.table.format != "delta":
            raise HistoryError("--compact needs a Delta archive (--format delta): a Parquet "
                               "archive's files belong to the runs their manifests commit.")
        if self.request.dry_run:
            return self._dry_run(result)
        run_id = new_run_id(dt.datetime.now(dt.UTC))
        with self.files.locked(run_id):
            self.table.repair(self.progress)
            if self.request.purge:
                self._resume_purges(result)
            self._archive(run_id, result)
            if self.request.compact_target_bytes is not None:
                result.compaction = compact(self.files, self.progress,
                                            self.request.compact_target_bytes)
        return result

    def _dry_run(self, result: ArchiveResult) -> ArchiveResult:
        manifests = self.files.manifests()
        if self.request.purge:
            purged = self.files.purged_runs()
            result.unpurged = [m.run_id for m in manifests if m.run_id not in purged]
        result.selected = self.store.selection_stats(self._selection(result.cutoff, manifests))
        return result

    def _selection(self, cutoff: dt.datetime, manifests: Sequence[Manifest]) -> ClosedRowSelection:
        return ClosedRowSelection(statuses=self.statuses, before=cutoff,
                                  archived=archived_spans(manifests))

    def _resume_purges(self, result: ArchiveResult) -> None:
        purged = self.files.purged_runs()
        for manifest in self.files.manifests():
            if manifest.run_id not in purged:
                self.progress(f"Purging committed run {manifest.run_id} "
                              f"({manifest.checksum.rows:,} rows), which was not purged yet.")
                record = self._purge(manifest)
                result.purged += record.deleted
                result.purge_kept += record.kept
                result.resumed.append(manifest.run_id)

    def _archive(self, run_id: str, result: ArchiveResult) -> None:
        started = time.monotonic()
        manifests = self.files.manifests()
        selection = self._selection(result.cutoff, manifests)
        stats = self.store.selection_stats(selection)
        result.selected = stats
        frozen = _checksum(stats)
        if frozen.rows == 0:
            self.progress("Nothing to archive.")
            return
        result.seconds["freeze"] = time.monotonic() - started
        started = time.monotonic()
        low, high = min(s.min_id for s in stats), max(s.max_id for s in stats)
        self.progress(f"Froze {frozen.rows:,} row(s), ids {low}..{high}, processed before "
                      f"{result.cutoff.isoformat(timespec='milliseconds')}.")
        self._check_topic_names(_topics(stats))
        frozen_selection = ClosedRowSelection(
            statuses=selection.statuses, before=selection.before,
            archived=selection.archived, id_range=(low, high),
        )
        self._write(run_id, frozen_selection, frozen.rows)
        result.seconds["read+write"] = time.monotonic() - started

        started = time.monotonic()
        staging = self.spark.read.parquet(self.files.layout.staging_dir(run_id))
        stats = self._verified_stats(run_id, frozen_selection, stats, self._read_back(staging))
        manifest = Manifest(
            run_id=run_id, cutoff=result.cutoff, statuses=selection.statuses,
            min_id=low, max_id=high, checksum=_checksum(stats), topics=_topics(stats),
            committed_at=dt.datetime.now(dt.UTC),
            source={"vendor": self.source.vendor, "database": self.store.alias,
                    "table": self.store.dialect.table},
        )
        self.table.commit(manifest)
        ranges = self._range_checksums(manifest)
        committed = _total(ranges.values())
        if committed != manifest.checksum:
            self.table.retract(run_id)
            raise NotVerified(
                f"Run {run_id} read back through its manifest as {committed.describe()}, "
                f"not {manifest.checksum.describe()}; the commit was undone and nothing purged."
            )
        result.run_id, result.archived = run_id, manifest.checksum.rows
        result.seconds["verify"] = time.monotonic() - started
        self.progress(f"Committed run {run_id}: {manifest.checksum.describe()}.")

        if self.request.purge:
            started = time.monotonic()
            record = self._purge(manifest, ranges)
            result.purged += record.deleted
            result.purge_kept += record.kept
            result.seconds["purge"] = time.monotonic() - started

    # -- steps -------------------------------------------------------------------------
    def _check_topic_names(self, topics: dict[str, int]) -> None:
        escape = self.spark._jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils
        for topic in topics:
            name = f"topic={escape.escapePathName(topic)}"
            if len(name.encode("utf-8")) > _MAX_NAME_BYTES:
                raise HistoryError(
                    f"Topic {topic[:60]!r}... makes a partition directory name of "
                    f"{len(name.encode('utf-8'))} bytes, over the {_MAX_NAME_BYTES} that file "
                    "systems allow; nothing was written."
                )

    def _partitions(self, rows: int) -> int:
        if self.request.partitions:
            return self.request.partitions
        # At least one per core; more for big selections, so no task holds too much.
        return max(int(self.spark.sparkContext.defaultParallelism), -(-rows // 500_000))

    def _write(self, run_id: str, selection: ClosedRowSelection, rows: int) -> None:
        partitions = self._partitions(rows)
        frame = self.table.prepare(
            read_outbox(self.spark, self.source, self.store.dialect, selection,
                        partitions=partitions, fetch_size=self.request.fetch_size), run_id)
        self.progress(f"Reading {rows:,} row(s) in {partitions} id range(s) and writing "
                      "Parquet ...")

        def report(done: int, total: int) -> None:
            self.progress(f"  ... ~{rows * done // max(total, 1):,} of {rows:,} rows read "
                          f"and written ({done}/{total} tasks)")

        with watch_tasks(self.spark, report):
            (frame.write.mode("errorifexists").partitionBy("topic", "day")
             .parquet(self.files.layout.staging_dir(run_id)))

    @staticmethod
    def _read_back(frame: Any) -> Checksum:
        return _row_checksum(frame.agg(*_checksum_columns()).collect()[0])

    def _purge_width(self) -> int:
        bound = self.store.dialect.closed_rows.max_purge_range_ids
        return min(self.request.purge_range_size, bound or self.request.purge_range_size)

    def _range_checksums(self, manifest: Manifest) -> dict[int, Checksum]:
        """The committed run as readers read it, per purge range (``id // width``): one
        pass that both verifies the commit and tells the purge what each range holds."""
        from pyspark.sql import functions as F

        frame = self.table.read(manifest.run_id)
        rows = (frame.groupBy(F.floor(F.col("id") / self._purge_width()).alias("range"))
                .agg(*_checksum_columns()).collect())
        return {int(row["range"]): _row_checksum(row) for row in rows}

    def _verified_stats(
        self, run_id: str, selection: ClosedRowSelection, frozen: list[SelectionStats],
        written: Checksum,
    ) -> list[SelectionStats]:
        """The stats the written Parquet matches: the freeze's, or, when rows left the
        selection (were redriven or deleted) before Spark read them, the selection's as
        it is now. Otherwise the staging is dropped and the run fails."""
        if written == _checksum(frozen):
            return frozen
        now = self.store.selection_stats(selection)
        if written == _checksum(now):
            self.progress(f"{_checksum(frozen).rows - written.rows:,} row(s) left the "
                          "selection while it was read; the archive holds the rest.")
            return now
        self.files.delete(self.files.layout.staging_dir(run_id))
        raise NotVerified(
            f"The Parquet written for run {run_id} holds {written.describe()}; the database "
            f"selection held {_checksum(frozen).describe()} when frozen and "
            f"{_checksum(now).describe()} now. Nothing was committed or purged; run again."
        )

    def _purge(self, manifest: Manifest,
               ranges: dict[int, Checksum] | None = None) -> PurgeRecord:
        """Delete the run's archived rows that are still closed with the archived
        processed_at, one id range at a time; record that the run is purged."""
        ranges = self._range_checksums(manifest) if ranges is None else ranges
        width = self._purge_width()
        # The runs committed before this one: what its selection left out when it froze.
        earlier = list(takewhile(lambda m: m.run_id != manifest.run_id, self.files.manifests()))
        frozen = ClosedRowSelection(statuses=manifest.statuses, before=manifest.cutoff,
                                    archived=archived_spans(earlier))
        total, deleted, differing = manifest.checksum.rows, 0, []
        for key in sorted(ranges):
            low = max(key * width, manifest.min_id)
            high = min((key + 1) * width - 1, manifest.max_id)
            taken = self.store.purge_selection(replace(frozen, id_range=(low, high)),
                                               astuple(ranges[key]))
            if taken is None:
                differing.append(key)
            else:
                deleted += taken
                self.progress(f"  ... {deleted:,} of {total:,} archived rows purged")
        if differing:
            self.progress(f"{len(differing)} id range(s) no longer hold exactly the archived "
                          "rows; purging their archived rows one by one.")
            deleted += self._purge_keys(manifest, differing, deleted)
        record = PurgeRecord(manifest.run_id, dt.datetime.now(dt.UTC), deleted, total - deleted)
        self.files.record_purge(record)
        self.progress(f"Purged run {manifest.run_id}: {deleted:,} row(s) deleted"
                      + (f", {record.kept:,} had changed or were gone" if record.kept else "")
                      + ".")
        return record

    def _purge_keys(self, manifest: Manifest, ranges: Sequence[int], done: int) -> int:
        """Delete the archived (id, processed_at) pairs of ``ranges`` that are still in
        the run's statuses, ``purge_batch_size`` rows a statement."""
        from pyspark.sql import functions as F

        width = self._purge_width()
        # The driver takes the archived keys one range at a time.
        keys = (self.table.read(manifest.run_id)
                .withColumn("range", F.floor(F.col("id") / width))
                .where(F.col("range").isin(list(ranges)))
                .groupBy("range")
                .agg(F.collect_list(F.array("id", F.unix_micros("processed_at"))).alias("keys")))
        size = self.request.purge_batch_size
        deleted = 0
        for row in keys.toLocalIterator():
            rows = [(int(row_id), _EPOCH + dt.timedelta(microseconds=int(at)))
                    for row_id, at in row["keys"]]
            for start in range(0, len(rows), size):
                deleted += self.store.purge_archived(rows[start:start + size],
                                                     statuses=manifest.statuses)
                self.progress(f"  ... {done + deleted:,} of {manifest.checksum.rows:,} "
                              "archived rows purged")
        return deleted


def archive(request: ArchiveRequest, progress: Progress | None = None) -> ArchiveResult:
    """Run one archive; see the module's docstring for the steps."""
    with open_workspace(request) as workspace:
        return Archiver(request, workspace, progress).run()
