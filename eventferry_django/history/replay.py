"""``outbox_replay``: a slice of the committed archive back into the outbox, through
``publish_events`` like any other event.

Each replayed event gets a new message id, ``uuid5(replay id + original message id)``,
and carries both ids in its headers (:data:`REPLAY_ID_HEADER`,
:data:`ORIGINAL_ID_HEADER`), so consumers can tell a replay from the original. The
replay id is given, or derived from the selected events themselves: the identical
selection gets the same replay id, the same new message ids, and so inserts nothing
the second time (rows are checked against the outbox and against replays already
archived). Events go in in their original id order, in chunks, each chunk one
transaction: every aggregate's events get increasing new ids, so the relay delivers
them in their original order.

Replayed events are not replayed again: a slice selects originals only.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from ..conf import get_settings
from ..enqueue import NewEvent, publish_events
from ..exceptions import InvalidEvent
from ..maintenance import PURGE_STATUSES
from ..models import OutboxEvent
from .errors import HistoryError
from .jdbc import outbox_source
from .reader import read_committed
from .session import spark_session
from .storage import ArchiveFiles

Progress = Callable[[str], None]

REPLAY_ID_HEADER = "eventferry_replay_id"
ORIGINAL_ID_HEADER = "eventferry_original_message_id"
#: The namespace of replayed message ids; fixed forever, or reruns would insert again.
REPLAY_NAMESPACE = uuid.UUID("6f0c3e2a-8f4e-5b7d-9a51-3c2d1e0f4b6a")
#: Events per transaction; also how many message ids one existence check binds
#: (SQL Server takes 2,100 parameters at most).
CHUNK = 1000


def replayed_message_id(replay_id: str, original_message_id: str) -> str:
    return str(uuid.uuid5(REPLAY_NAMESPACE, f"{replay_id}/{original_message_id}"))


@dataclass(frozen=True)
class ReplayRequest:
    path: str
    topics: Sequence[str] = ()
    aggregate_id: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    status: str = "done"
    replay_id: str | None = None
    dry_run: bool = False
    master: str | None = None
    using: str | None = None


@dataclass
class ReplayResult:
    replay_id: str
    dry_run: bool
    selected: dict[str, int] = field(default_factory=dict)
    inserted: int = 0
    present: int = 0

    def summary(self) -> str:
        total = sum(self.selected.values())
        if self.dry_run:
            return f"Would replay {total:,} event(s) as replay {self.replay_id}."
        text = (f"Replayed {self.inserted:,} of {total:,} selected event(s) as replay "
                f"{self.replay_id}")
        if self.present:
            text += f"; {self.present:,} were replayed before under this id"
        return text + "."


def _slice(spark: Any, files: ArchiveFiles, request: ReplayRequest) -> Any:
    """The selected originals, one row per message id (the latest archived outcome)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    try:
        statuses = [int(s) for s in PURGE_STATUSES[request.status]]
    except KeyError:
        raise HistoryError(f"status must be one of {', '.join(PURGE_STATUSES)}.") from None
    frame = read_committed(spark, files, topics=request.topics, since=request.since,
                           until=request.until)
    frame = frame.where(F.col("status").isin(statuses)).where(
        F.get_json_object("headers", f"$.{REPLAY_ID_HEADER}").isNull()
    )
    if request.aggregate_id is not None:
        frame = frame.where(F.col("aggregate_id") == request.aggregate_id)
    # A row redriven after it was archived, and archived again, has two outcomes.
    latest = Window.partitionBy("message_id").orderBy(F.col("processed_at").desc())
    return frame.withColumn("_n", F.row_number().over(latest)).where("_n = 1").drop("_n")


def _derived_replay_id(frame: Any) -> str:
    """A replay id from the selected message ids alone (order-free), so the identical
    selection always gets the same id."""
    from pyspark.sql import functions as F

    row = frame.agg(F.count(F.lit(1)).alias("n"),
                    F.sum(F.xxhash64("message_id").cast("decimal(38,0)")).alias("h")).collect()[0]
    digest = hashlib.sha256(f"{row['n']}:{row['h'] or 0}".encode()).hexdigest()
    return f"r-{digest[:16]}"


def _replayed_before(spark: Any, files: ArchiveFiles, request: ReplayRequest,
                     replay_id: str) -> set[str]:
    """Original message ids this replay already put in the outbox that were archived
    (and perhaps purged) since."""
    from pyspark.sql import functions as F

    frame = read_committed(spark, files, topics=request.topics).where(
        F.get_json_object("headers", f"$.{REPLAY_ID_HEADER}") == replay_id
    ).select(F.get_json_object("headers", f"$.{ORIGINAL_ID_HEADER}").alias("original"))
    return {row["original"] for row in frame.toLocalIterator()}


def _chunks(rows: Iterable[Any], size: int) -> Iterable[list[Any]]:
    chunk: list[Any] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _event(row: Any, replay_id: str) -> NewEvent:
    headers = json.loads(row["headers"])
    headers[REPLAY_ID_HEADER] = replay_id
    headers[ORIGINAL_ID_HEADER] = row["message_id"]
    return NewEvent(
        topic=row["topic"], payload=json.loads(row["payload"]),
        aggregate_type=row["aggregate_type"], aggregate_id=row["aggregate_id"],
        headers=headers, partition_key=row["partition_key"],
        message_id=replayed_message_id(replay_id, row["message_id"]),
        # Null in archives written by development builds before 0.1.0, which the reader fills in.
        schema_version=row["schema_version"],
    )


def replay(request: ReplayRequest, progress: Progress | None = None) -> ReplayResult:
    """Re-enqueue the selected slice; see the module's docstring."""
    from pyspark.sql import functions as F

    report = progress or (lambda message: None)
    settings = get_settings()
    alias = request.using or settings.database
    with spark_session(outbox_source(alias), settings.spark, request.master) as spark:
        files = ArchiveFiles(spark, request.path)
        files.require_committed()
        selection = _slice(spark, files, request)
        replay_id = request.replay_id or _derived_replay_id(selection)
        result = ReplayResult(replay_id, request.dry_run, selected={
            row["topic"]: int(row["count"])
            for row in selection.groupBy("topic").count().orderBy("topic").collect()
        })
        total = sum(result.selected.values())
        report(f"Selected {total:,} archived event(s) for replay {replay_id}.")
        if request.dry_run or not total:
            return result
        archived_before = _replayed_before(spark, files, request, replay_id)
        rows = selection.select("message_id", "topic", "aggregate_type", "aggregate_id",
                                "partition_key", "payload", "headers", "schema_version",
                                "id").orderBy(F.col("id"))
        for chunk in _chunks(rows.toLocalIterator(), CHUNK):
            events = [_event(row, replay_id) for row in chunk
                      if row["message_id"] not in archived_before]
            present = set(OutboxEvent.objects.using(alias).filter(
                message_id__in=[e.message_id for e in events]
            ).values_list("message_id", flat=True))
            new = [e for e in events if e.message_id not in present]
            result.present += len(chunk) - len(new)
            try:
                with transaction.atomic(using=alias):
                    publish_events(new, using=alias)
            except InvalidEvent as exc:
                raise HistoryError(f"An archived event cannot be published again: {exc}. "
                                   f"{result.inserted:,} event(s) were replayed before it; "
                                   "running the same replay again continues after them.") from exc
            result.inserted += len(new)
            report(f"  ... {result.inserted + result.present:,} of {total:,} events handled")
        return result
