"""``outbox_erase``: forget one aggregate's events, on disk.

One erasure, under the archive's lock:

1. **Find** the aggregate's archived rows and its closed outbox rows (their message
   ids, for the inbox).
2. **Record** it in the erasure log, ``ROOT/_erasures/ID.json``: when, the aggregate's
   key and how many rows; never a payload. Its state is ``started``.
3. **Delete** the inbox's records of those message ids (if asked), then the closed
   outbox rows, then the archived rows: a Delta table deletes them in one commit and
   vacuums every file no version refers to any more, whatever the table's retention; a
   Parquet archive rewrites the files that hold them (:mod:`.parquet_rewrite`).
4. **Close** the log entry: state ``done``.

Each step removes what the steps after it no longer need to find, so a crash anywhere
is finished by running the same erasure again (an erasure left ``started`` is finished
by the next erasure on the archive, whatever its aggregate).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..conf import get_settings
from ..contract import CLOSED, OPEN
from ..models import InboxMessage, OutboxEvent
from .delta import DeltaArchive
from .delta_reader import decoded_path_column
from .errors import HistoryError
from .jdbc import outbox_source
from .layout import ArchiveLayout, new_run_id
from .parquet_rewrite import rewrite_without
from .reader import read_committed
from .run_tables import archive_format
from .session import spark_session
from .storage import ArchiveFiles

Progress = Callable[[str], None]
#: Message ids per inbox DELETE (SQL Server binds 2,100 parameters at most).
INBOX_CHUNK = 1000


@dataclass(frozen=True)
class ErasureRequest:
    path: str
    aggregate_id: str
    aggregate_type: str | None = None
    inbox: bool = False
    dry_run: bool = False
    master: str | None = None
    using: str | None = None

    def __post_init__(self) -> None:
        if not self.aggregate_id:
            raise HistoryError("Say which aggregate to erase: an aggregate id.")


@dataclass(frozen=True)
class ErasureRecord:
    """One entry of the erasure log; the counts are what the erasure removed."""

    erasure_id: str
    aggregate_id: str
    aggregate_type: str | None
    inbox: bool
    started_at: str
    state: str = "started"
    finished_at: str | None = None
    archived_rows: int = 0
    archive_files: int = 0
    outbox_rows: int = 0
    inbox_records: int = 0
    #: Parquet: the files being rewritten, so a rerun finishes these very files.
    files: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    def describe(self) -> str:
        kind = f"{self.aggregate_type}/" if self.aggregate_type else ""
        where = f" in {self.archive_files:,} file(s)" if self.archive_files else ""
        return (f"aggregate {kind}{self.aggregate_id}: {self.archived_rows:,} archived "
                f"row(s){where}, {self.outbox_rows:,} closed outbox row(s), "
                f"{self.inbox_records:,} inbox record(s)")


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class ErasureLog:
    """``ROOT/_erasures/``: one JSON file per erasure."""

    def __init__(self, files: ArchiveFiles) -> None:
        self.files = files

    def records(self) -> list[ErasureRecord]:
        found = []
        for name in self.files.names(self.files.layout.erasures):
            erasure_id = ArchiveLayout.run_id_of(name)
            if erasure_id is not None and name.endswith(".json"):
                path = self.files.layout.erasure_record(erasure_id)
                try:
                    found.append(ErasureRecord(**json.loads(self.files.read_text(path))))
                except (ValueError, TypeError) as exc:
                    raise HistoryError(f"The erasure log entry {path} is not one this version "
                                       f"reads: {exc}. Move it away if it does not belong "
                                       "to this archive.") from None
        return found

    def write(self, record: ErasureRecord) -> None:
        self.files.write_text(self.files.layout.erasure_record(record.erasure_id),
                              record.to_json())


@dataclass
class ErasureResult:
    dry_run: bool
    record: ErasureRecord
    open_rows: int = 0
    finished: list[ErasureRecord] = field(default_factory=list)

    def summary(self) -> str:
        text = ("Would erase " if self.dry_run else "Erased ") + self.record.describe()
        if not self.dry_run:
            text += f" (erasure {self.record.erasure_id})"
        if self.open_rows:
            text += (f"; {self.open_rows:,} open outbox row(s) of it are not delivered yet "
                     "and were kept: erase again once they are")
        return text + "."


def aggregate_condition(record: ErasureRecord) -> Any:
    from pyspark.sql import functions as F

    condition = F.col("aggregate_id") == F.lit(record.aggregate_id)
    if record.aggregate_type is not None:
        condition = condition & (F.col("aggregate_type") == F.lit(record.aggregate_type))
    return condition


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class Eraser:
    """Erasures on one archive, with the outbox of ``alias``."""

    def __init__(self, spark: Any, files: ArchiveFiles, alias: str, progress: Progress) -> None:
        self.spark = spark
        self.files = files
        self.alias = alias
        self.progress = progress
        self.format = archive_format(files)
        if self.format is None:
            raise HistoryError(f"{files.layout.root} holds no archive; give the path "
                               "outbox_archive --to wrote.")
        self.log = ErasureLog(files)

    def _outbox(self, record: ErasureRecord) -> Any:
        rows = OutboxEvent.objects.using(self.alias).filter(aggregate_id=record.aggregate_id)
        return rows if record.aggregate_type is None else rows.filter(
            aggregate_type=record.aggregate_type)

    def find(self, record: ErasureRecord) -> tuple[ErasureRecord, set[str]]:
        """``record`` with the counts of what is left to erase, and the message ids."""
        archived = read_committed(self.spark, self.files).where(aggregate_condition(record))
        if self.format == "parquet":
            archived = archived.withColumn("_file", decoded_path_column())
            found = archived.select("message_id", "_file").collect()
            files = sorted({row["_file"] for row in found})
        else:
            found = archived.select("message_id").collect()
            files = []
        closed = set(self._outbox(record).filter(status__in=CLOSED)
                     .values_list("message_id", flat=True))
        ids = {row["message_id"] for row in found} | closed
        return replace(
            record, archived_rows=max(record.archived_rows, len(found)),
            archive_files=max(record.archive_files, len(files)),
            outbox_rows=max(record.outbox_rows, len(closed)),
            inbox_records=max(record.inbox_records,
                              sum(1 for _ in self._inbox_records(record, ids))),
            files=record.files or files,
        ), ids

    def _inbox_records(self, record: ErasureRecord, ids: set[str]) -> Iterator[str]:
        if not record.inbox:
            return
        ordered = sorted(ids)
        for start in range(0, len(ordered), INBOX_CHUNK):
            yield from InboxMessage.objects.using(self.alias).filter(
                message_id__in=ordered[start:start + INBOX_CHUNK]).values_list(
                "message_id", flat=True)

    def open_rows(self, record: ErasureRecord) -> int:
        return int(self._outbox(record).filter(status__in=OPEN).count())

    def erase(self, record: ErasureRecord) -> ErasureRecord:
        """Carry out ``record`` (new, or left ``started`` by a crash) to ``done``."""
        record, ids = self.find(record)
        self.log.write(record)
        if record.inbox:
            ordered = sorted(ids)
            for start in range(0, len(ordered), INBOX_CHUNK):
                InboxMessage.objects.using(self.alias).filter(
                    message_id__in=ordered[start:start + INBOX_CHUNK]).delete()
        self._outbox(record).filter(status__in=CLOSED).delete()
        if self.format == "delta":
            files = self._erase_delta(record)
            record = replace(record, archive_files=max(record.archive_files, files))
        elif record.files:
            rewrite_without(self.spark, self.files, record.files, ~aggregate_condition(record),
                            self.files.layout.erasure_staging(record.erasure_id), self.progress)
        record = replace(record, state="done", finished_at=_now(), files=[])
        self.log.write(record)
        self.progress(f"Erased {record.describe()}.")
        return record

    def _erase_delta(self, record: ErasureRecord) -> int:
        predicate = f"aggregate_id = {_sql_text(record.aggregate_id)}"
        if record.aggregate_type is not None:
            predicate += f" AND aggregate_type = {_sql_text(record.aggregate_type)}"
        archive = DeltaArchive(self.files.layout.root)
        rows, files = archive.delete(predicate, {"eventferry.erasure_id": record.erasure_id})
        removed = archive.vacuum()
        self.progress(f"Deleted {rows:,} row(s) from the Delta table, rewriting {files} "
                      f"file(s); vacuumed {len(removed)} file(s) no version needs.")
        return files


def erase(request: ErasureRequest, progress: Progress | None = None) -> ErasureResult:
    """Erase ``request``'s aggregate; see the module's docstring."""
    say = progress or (lambda message: None)
    settings = get_settings()
    alias = request.using or settings.database
    erasure_id = new_run_id(dt.datetime.now(dt.UTC))
    with spark_session(outbox_source(alias), settings.spark, request.master) as spark:
        files = ArchiveFiles(spark, request.path)
        eraser = Eraser(spark, files, alias, say)
        record = ErasureRecord(erasure_id, request.aggregate_id, request.aggregate_type,
                               request.inbox, _now())
        if request.dry_run:
            found, _ = eraser.find(record)
            return ErasureResult(True, found, eraser.open_rows(record))
        with files.locked(erasure_id):
            result = ErasureResult(False, record)
            for unfinished in [r for r in eraser.log.records() if r.state != "done"]:
                say(f"Finishing erasure {unfinished.erasure_id}, which a crash interrupted.")
                finished = eraser.erase(unfinished)
                if _same_key(finished, record):
                    result.record = finished  # this very erasure, run again
                else:
                    result.finished.append(finished)
            if result.record.state != "done":
                result.record = eraser.erase(record)
            result.open_rows = eraser.open_rows(record)
        return result


def _same_key(one: ErasureRecord, other: ErasureRecord) -> bool:
    return ((one.aggregate_id, one.aggregate_type, one.inbox)
            == (other.aggregate_id, other.aggregate_type, other.inbox))


def erasure_count(files: ArchiveFiles) -> int:
    """How many erasures the archive's log records as done."""
    return sum(1 for r in ErasureLog(files).records() if r.state == "done")
