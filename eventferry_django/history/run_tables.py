"""How an archive run is committed, read back and undone, per archive format.

``outbox_archive`` freezes, writes a staging directory with Spark and verifies it the
same way for every format; what happens next is the format's:

- :class:`ParquetRuns`: the staging directory moves into place and the run's manifest
  is written, last (see :mod:`.storage`).
- :class:`DeltaRuns`: the files move into the Delta table's partition directories and
  delta-rs commits them as one version (see :mod:`.delta`).

Readers need not know: :func:`.reader.read_committed` reads either.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

from ..history_settings import ARCHIVE_FORMATS
from .delta import DeltaArchive, StagedFile, file_stats
from .delta_reader import decoded_path_column, read_delta
from .errors import HistoryError
from .layout import RUN_PARTITION, ArchiveLayout
from .manifest import Manifest
from .reader import read_committed
from .storage import ArchiveFiles

Progress = Callable[[str], None]


class RunTable(Protocol):
    """What the archiver asks of a format, under the archive's lock."""

    format: str

    def prepare(self, frame: Any, run_id: str) -> Any:
        """The DataFrame Spark writes to the run's staging directory."""

    def repair(self, progress: Progress) -> None:
        """Finish or remove what runs that crashed left behind."""

    def commit(self, manifest: Manifest) -> None:
        """Make the verified staging of ``manifest``'s run part of the archive."""

    def read(self, run_id: str) -> Any:
        """The committed rows of one run."""

    def retract(self, run_id: str) -> None:
        """Undo a commit whose rows did not read back right."""


def archive_format(files: ArchiveFiles) -> str | None:
    """The format of what ``files`` holds: ``delta``, ``parquet``, or None if empty."""
    if files.exists(files.layout.delta_log):
        return "delta"
    if files.names(files.layout.manifests):
        return "parquet"
    return None


def run_table(spark: Any, files: ArchiveFiles, wanted: str) -> RunTable:
    """The run table of ``wanted`` format at ``files``; an archive of the other format
    there is an error, not a second archive in one directory."""
    if wanted not in ARCHIVE_FORMATS:
        raise HistoryError(f"The archive format must be one of {', '.join(ARCHIVE_FORMATS)}, "
                           f"got {wanted!r}.")
    found = archive_format(files)
    if found is not None and found != wanted:
        raise HistoryError(f"{files.layout.root} holds a {found} archive; archive to it with "
                           f"--format {found}, or give another path for a {wanted} one.")
    return DeltaRuns(spark, files) if wanted == "delta" else ParquetRuns(spark, files)


def remove_leftovers(files: ArchiveFiles, progress: Progress) -> None:
    """Remove staging and run directories of runs that never committed."""
    committed = {m.run_id for m in files.manifests()}
    for leftover in files.uncommitted(committed):
        progress(f"Removing {leftover}: a run that never committed left it.")
        files.delete(leftover)


class ParquetRuns:
    """Runs as directories of Parquet files, each committed by its manifest."""

    format = "parquet"

    def __init__(self, spark: Any, files: ArchiveFiles) -> None:
        self.spark = spark
        self.files = files

    def prepare(self, frame: Any, run_id: str) -> Any:
        return frame  # the run id is the directory the run moves to

    def repair(self, progress: Progress) -> None:
        remove_leftovers(self.files, progress)

    def commit(self, manifest: Manifest) -> None:
        self.files.commit(manifest)

    def read(self, run_id: str) -> Any:
        return read_committed(self.spark, self.files, run_ids=[run_id])

    def retract(self, run_id: str) -> None:
        self.files.retract(run_id)


class DeltaRuns:
    """Runs as commits of a Delta table.

    A run's commit: record the manifest and the files' final paths in
    ``_commits/RUN.json``, move the files into the table's partition directories,
    commit them through delta-rs with the run's application transaction, then write the
    manifest and drop the record. A run found with a record and no commit crashed before
    its commit: its files are removed. One found with both crashed after it: its
    manifest is written.
    """

    format = "delta"

    def __init__(self, spark: Any, files: ArchiveFiles) -> None:
        self.spark = spark
        self.files = files
        self.archive = DeltaArchive(files.layout.root)
        self._versions: dict[str, int] = {}
        self._paths: dict[str, list[str]] = {}

    def prepare(self, frame: Any, run_id: str) -> Any:
        from pyspark.sql import functions as F

        return frame.withColumn(RUN_PARTITION, F.lit(run_id))

    def repair(self, progress: Progress) -> None:
        layout = self.files.layout
        for name in self.files.names(layout.commits):
            run_id = ArchiveLayout.run_id_of(name)
            if run_id is None:
                continue
            record = json.loads(self.files.read_text(layout.commit_record(run_id)))
            if self.archive.committed(run_id):
                progress(f"Run {run_id} committed to the Delta table before a crash; "
                         "writing its manifest.")
                self._finish(run_id, record)
            else:
                progress(f"Removing the files of run {run_id}: it never committed.")
                for path in record["files"]:
                    self.files.delete(f"{layout.root}/{path}")
                self.files.delete(layout.commit_record(run_id))
        remove_leftovers(self.files, progress)

    def commit(self, manifest: Manifest) -> None:
        layout = self.files.layout
        run_id = manifest.run_id
        staged = self._staged(run_id)
        record = {"manifest": json.loads(manifest.to_json()), "files": [f.path for f in staged]}
        self.files.write_text(layout.commit_record(run_id), json.dumps(record, indent=2) + "\n")
        moved = []
        for f in staged:
            target = f"{layout.root}/{f.path}"
            self.files.rename(f"{layout.staging_dir(run_id)}/{f.path}", target)
            size, modified = self.files.size_and_mtime(target)
            moved.append(replace(f, size=size, modified_ms=modified))
        self.archive.create()
        self._versions[run_id] = self.archive.commit_run(run_id, moved)
        self._paths[run_id] = [f.path for f in moved]
        self._finish(run_id, record)

    def _staged(self, run_id: str) -> list[StagedFile]:
        """The run's staged files with their partition values and statistics (size and
        time once moved): one Spark job over the staging directory."""
        from pyspark.sql import functions as F

        staging = self.files.layout.staging_dir(run_id)
        rows = (self.spark.read.parquet(staging)
                .groupBy(decoded_path_column().alias("file"), "topic", "day")
                .agg(F.count(F.lit(1)).alias("rows"), F.min("id").alias("low"),
                     F.max("id").alias("high"), F.min("processed_at").alias("first"),
                     F.max("processed_at").alias("last"))
                .collect())
        marker = f"/{RUN_PARTITION}={run_id}/"
        return [StagedFile(row["file"].split(marker, 1)[1], row["topic"], row["day"].isoformat(),
                           file_stats(int(row["rows"]), int(row["low"]), int(row["high"]),
                                      row["first"], row["last"]))
                for row in rows]

    def _finish(self, run_id: str, record: dict[str, Any]) -> None:
        layout = self.files.layout
        manifest = Manifest.from_json(json.dumps(record["manifest"]), layout.commit_record(run_id))
        self.files.write_text(layout.manifest(run_id), manifest.to_json())
        self.files.delete(layout.commit_record(run_id))
        self.files.delete(layout.staging_dir(run_id))

    def read(self, run_id: str) -> Any:
        """The run's rows in the version its commit made (the latest one for a run
        committed earlier: erasure and compaction rewrite files since)."""
        return read_delta(self.spark, self.files.layout.root, run_ids=[run_id],
                          version=self._versions.get(run_id))

    def retract(self, run_id: str) -> None:
        """Undo the commit this object just made: the manifest, then a commit removing
        the run's files."""
        self.files.delete(self.files.layout.manifest(run_id))
        self.archive.remove_run(run_id, self._paths.pop(run_id))
