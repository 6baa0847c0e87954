"""``outbox_archive --compact``: merge the small files many archive runs leave in each
partition of a Delta archive into files of about 128 MB, as one Delta commit.

Every run adds a few files per topic and day (one per Spark task that met rows of
that partition), and erasures add more; readers pay per file. delta-rs's compaction
(``OPTIMIZE``) rewrites each partition's small files into files of the target size and
commits the lot as one version: readers see the old files or the new ones, never both.
The files it replaced stay on disk for time travel until a vacuum (an erasure vacuums).

A Parquet archive is left as it is: its runs are its commits, each under a manifest
that the purge and the next archive runs read, so merging files across runs needs a
table format: archive with ``--format delta``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .delta import DEFAULT_COMPACT_TARGET_BYTES, DeltaArchive
from .errors import HistoryError
from .run_tables import archive_format
from .storage import ArchiveFiles

Progress = Callable[[str], None]


@dataclass(frozen=True)
class CompactionResult:
    files_removed: int
    files_added: int
    partitions: int
    version: int | None

    def summary(self) -> str:
        if self.version is None:
            return "Compaction found no partition with small files to merge"
        return (f"Compacted {self.files_removed:,} file(s) in {self.partitions:,} "
                f"partition(s) into {self.files_added:,} as version {self.version}")


def compact(files: ArchiveFiles, progress: Progress,
            target_bytes: int = DEFAULT_COMPACT_TARGET_BYTES) -> CompactionResult:
    """Compact the Delta archive at ``files`` (its lock held by the caller)."""
    if archive_format(files) != "delta":
        raise HistoryError(
            f"{files.layout.root} is not a Delta archive: compaction merges files across "
            "runs, which only a table format can commit. Archive with --format delta."
        )
    archive = DeltaArchive(files.layout.root)
    before = int(archive.table().version())
    progress(f"Compacting the Delta table (version {before}) into files of about "
             f"{target_bytes // (1024 * 1024):,} MB per partition ...")
    metrics = archive.compact(target_bytes, {"eventferry.operation": "compaction"})
    after = int(archive.table().version())
    return CompactionResult(
        files_removed=int(metrics.get("numFilesRemoved", 0)),
        files_added=int(metrics.get("numFilesAdded", 0)),
        partitions=int(metrics.get("partitionsOptimized", 0)),
        version=after if after != before else None,
    )
