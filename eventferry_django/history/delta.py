"""An archive kept as a Delta Lake table, committed through delta-rs (the ``deltalake``
package), so no Maven artefact is needed at run time: Spark writes the Parquet files,
delta-rs records them in the table's log.

The table lives at the archive root::

    ROOT/_delta_log/...                      the Delta log: the commits
    ROOT/topic=T/day=YYYY-MM-DD/part-*.parquet   data files (Spark's and delta-rs's)
    ROOT/_manifests/RUN.json  _purges/RUN.json  _staging/  _lock   as for Parquet
    ROOT/_commits/RUN.json                   a run between its files and its commit
    ROOT/_erasures/ID.json                   the erasure log

Each archive run is one commit that adds its files and records the application
transaction ``eventferry-archive/RUN`` (version 1), so whether a run committed is a
question the table answers. Partition columns are ``topic`` and ``day``; every row also
carries its ``archive_run_id``. File statistics cover ``id`` and ``processed_at`` only
(``delta.dataSkippingStatsColumns``), so the log never holds payloads or aggregate ids.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from .columns import archive_schema
from .errors import MissingPrerequisite

#: The Delta table's partition columns, in path order.
PARTITION_COLUMNS = ("topic", "day")
#: Columns the log keeps statistics of: enough to skip files by id and time, and
#: nothing personal.
STATS_COLUMNS = ("id", "processed_at")
TABLE_CONFIGURATION = {"delta.dataSkippingStatsColumns": ",".join(STATS_COLUMNS)}
#: The application-transaction id of an archive run's commit.
ARCHIVE_APP_PREFIX = "eventferry-archive/"
#: Files compaction aims at, per partition.
DEFAULT_COMPACT_TARGET_BYTES = 128 * 1024 * 1024


def require_deltalake() -> Any:
    try:
        import deltalake
    except ImportError:
        raise MissingPrerequisite(
            "The delta format needs the deltalake package: pip install "
            "'eventferry-django[spark]'."
        ) from None
    return deltalake


def without_file_scheme(path: str) -> str:
    """A ``file:`` URL as the plain local path; any other URL as it is."""
    return "/" + path[len("file:"):].lstrip("/") if path.startswith("file:") else path


def delta_uri(root: str) -> str:
    """The archive root (as Hadoop qualified it) in the form delta-rs opens: a local
    path for ``file:``, ``s3://`` for Hadoop's ``s3a://``, any other URL as it is."""
    if root.startswith("s3a://"):
        return "s3://" + root[len("s3a://"):]
    return without_file_scheme(root)


def archive_app_id(run_id: str) -> str:
    return f"{ARCHIVE_APP_PREFIX}{run_id}"


@dataclass(frozen=True)
class DataFile:
    """A data file of the table: its path relative to the root, as on disk, and its
    partition values."""

    path: str
    topic: str
    day: str


@dataclass(frozen=True)
class StagedFile:
    """A file Spark wrote for a run, to be moved to ``path`` (relative to the root), with
    its partition values and the statistics of its rows; its size and modification time
    are known once it is there."""

    path: str
    topic: str
    day: str
    stats: str
    size: int = 0
    modified_ms: int = 0


def delta_schema() -> Any:
    """The archive's columns (see :func:`.columns.archive_schema`) as a Delta schema."""
    deltalake = require_deltalake()
    return deltalake.Schema([
        deltalake.Field(f.name, f.dataType.typeName(), nullable=f.nullable)
        for f in archive_schema().fields
    ])


class DeltaArchive:
    """The Delta table at one archive root, through delta-rs."""

    def __init__(self, root: str) -> None:
        self.deltalake = require_deltalake()
        self.uri = delta_uri(root)

    def exists(self) -> bool:
        return bool(self.deltalake.DeltaTable.is_deltatable(self.uri))

    def table(self, version: int | None = None) -> Any:
        return self.deltalake.DeltaTable(self.uri, version=version)

    def create(self) -> None:
        """An empty table (version 0) with the archive's schema and partitions."""
        if not self.exists():
            self.deltalake.DeltaTable.create(
                self.uri, delta_schema(), mode="ignore", partition_by=list(PARTITION_COLUMNS),
                name="eventferry_outbox_history", configuration=TABLE_CONFIGURATION,
            )

    def committed(self, run_id: str) -> bool:
        """Whether the table holds the commit of archive run ``run_id``."""
        if not self.exists():
            return False
        return self.table().transaction_version(archive_app_id(run_id)) is not None

    def commit_run(self, run_id: str, files: Sequence[StagedFile]) -> int:
        """Add the run's files in one commit recording the run's application
        transaction; the table's version after it."""
        from deltalake.transaction import AddAction

        table = self.table()
        actions = [AddAction(f.path, f.size, {"topic": f.topic, "day": f.day}, f.modified_ms,
                             True, f.stats) for f in files]
        table.create_write_transaction(
            actions, mode="append", schema=delta_schema(), partition_by=list(PARTITION_COLUMNS),
            commit_properties=self._properties({"eventferry.archive_run_id": run_id},
                                               app_id=archive_app_id(run_id)),
        )
        return int(self.table().version())

    def remove_run(self, run_id: str, paths: Sequence[str]) -> None:
        """A commit that removes ``paths`` (the run's files): undoing a run whose
        files did not read back right."""
        from deltalake.transaction import RemoveAction

        table = self.table()
        now = _now_ms()
        by_path = {f.path: f for f in self.data_files(table)}
        actions = [RemoveAction(p, True, now, partition_values={
            "topic": by_path[p].topic, "day": by_path[p].day}) for p in paths if p in by_path]
        table.create_write_transaction(
            actions, mode="append", schema=delta_schema(), partition_by=list(PARTITION_COLUMNS),
            commit_properties=self._properties({"eventferry.retracted_run_id": run_id}),
        )

    def data_files(self, table: Any | None = None) -> list[DataFile]:
        """The files of the table's current version (or of ``table``)."""
        table = table if table is not None else self.table()
        actions = table.get_add_actions(flatten=True)
        if actions.num_rows == 0:
            return []
        columns = [actions.column(name).to_pylist()
                   for name in ("path", "partition.topic", "partition.day")]
        # The log keeps paths URL-encoded; the file on disk has the decoded name.
        return [DataFile(unquote(path), topic, str(day))
                for path, topic, day in zip(*columns, strict=True)]

    def delete(self, predicate: str, metadata: dict[str, str]) -> tuple[int, int]:
        """Delete the rows matching ``predicate`` in one commit that rewrites the files
        holding them: (rows deleted, files rewritten)."""
        metrics = self.table().delete(predicate,
                                      commit_properties=self._properties(metadata))
        return int(metrics.get("num_deleted_rows", 0)), int(metrics.get("num_removed_files", 0))

    def vacuum(self) -> list[str]:
        """Delete every file no version from now on refers to, whatever the table's
        retention: what a delete or a compaction replaced is gone from disk after it."""
        return list(self.table().vacuum(retention_hours=0, dry_run=False,
                                         enforce_retention_duration=False))

    def compact(self, target_bytes: int, metadata: dict[str, str]) -> dict[str, Any]:
        """Merge each partition's small files into files of about ``target_bytes``,
        as one commit; delta-rs's metrics."""
        return dict(self.table().optimize.compact(
            target_size=target_bytes, commit_properties=self._properties(metadata)))

    def _properties(self, metadata: dict[str, str], app_id: str | None = None) -> Any:
        transactions = [self.deltalake.Transaction(app_id, 1)] if app_id else None
        return self.deltalake.CommitProperties(custom_metadata=metadata,
                                               app_transactions=transactions)


def file_stats(rows: int, low_id: int, high_id: int, first: Any, last: Any) -> str:
    """A data file's statistics as the Delta log spells them."""
    def moment(value: Any) -> str:
        return str(value.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z")

    return json.dumps({
        "numRecords": rows,
        "minValues": {"id": low_id, "processed_at": moment(first)},
        "maxValues": {"id": high_id, "processed_at": moment(last)},
        "nullCount": {"id": 0, "processed_at": 0},
    }, separators=(",", ":"))


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)
