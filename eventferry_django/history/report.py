"""``outbox_report``: delivery figures per topic and hour, from the committed archive
(Parquet or Delta) or live from the outbox table through Spark's JDBC source; from an
archive, also how many erasures its log records.

Every figure is over closed rows (done and dead) and belongs to the hour of their
``processed_at`` (UTC):

- ``events``, ``done``, ``dead``: rows;
- ``latency_p50_ms``, ``latency_p95_ms``, ``latency_p99_ms``: created -> processed
  of the done rows, exact percentiles with linear interpolation (PostgreSQL's
  ``percentile_cont``);
- ``attempts``: rows by their attempts count (failed tries before the outcome);
- ``dead_by_error``: dead rows by their last error.

Each archived outcome counts: an event that died, was redriven and was delivered later
counts once dead and once done if both outcomes were archived.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..conf import get_settings
from ..contract import CLOSED, DEAD, DONE
from ..store.closed_rows import ClosedRowSelection
from ..store.outbox import OutboxStore
from .erasure import erasure_count
from .figures import NO_ERROR, PERCENTILES, Count, Delivery, Figures
from .jdbc import outbox_source
from .reader import archive_schema, read_committed
from .session import spark_session
from .source import read_outbox
from .storage import ArchiveFiles

Progress = Callable[[str], None]
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class ReportRequest:
    out: str
    path: str | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    master: str | None = None
    partitions: int | None = None
    fetch_size: int = 10_000
    using: str | None = None

    @property
    def live(self) -> bool:
        return self.path is None


def _hour(micros: int | None) -> dt.datetime | None:
    return None if micros is None else _EPOCH + dt.timedelta(microseconds=int(micros))


def compute(frame: Any, source: str, since: dt.datetime | None,
            until: dt.datetime | None) -> Figures:
    """The figures of a DataFrame of closed rows (the archive's columns): two Spark
    jobs over one cached projection of the source."""
    from pyspark.sql import functions as F

    latency = (F.unix_micros("processed_at") - F.unix_micros("created_at")) / F.lit(1000.0)
    frame = frame.select(
        "topic", "status", "attempts", "last_error",
        F.unix_micros(F.date_trunc("hour", "processed_at")).alias("hour"),
        F.when(F.col("status") == DONE, latency).alias("latency_ms"),
    ).cache()
    try:
        # Percentiles do not add up, so the whole window is its own grouping set.
        deliveries = frame.groupingSets([["topic", "hour"], ["topic"]], "topic", "hour").agg(
            F.grouping("hour").alias("whole_window"),
            F.count(F.lit(1)).alias("events"),
            F.sum(F.when(F.col("status") == DONE, 1).otherwise(0)).alias("done"),
            F.sum(F.when(F.col("status") == DEAD, 1).otherwise(0)).alias("dead"),
            F.percentile("latency_ms", list(PERCENTILES)).alias("latency"),
        ).collect()
        keyed = frame.select(
            "topic", "hour", F.lit("attempts").alias("figure"),
            F.col("attempts").cast("string").alias("key"),
        ).unionByName(frame.where(F.col("status") == DEAD).select(
            "topic", "hour", F.lit("dead_by_error").alias("figure"),
            F.coalesce(F.col("last_error"), F.lit(NO_ERROR)).alias("key"),
        )).groupBy("topic", "hour", "figure", "key").count().collect()
    finally:
        frame.unpersist()

    figures = Figures(source=source, since=since, until=until)
    for row in sorted(deliveries, key=lambda r: (r["topic"], r["hour"] or 0)):
        delivery = Delivery(
            row["topic"], None if row["whole_window"] else _hour(row["hour"]),
            int(row["events"]), int(row["done"]), int(row["dead"]),
            tuple(row["latency"]) if row["done"] else (None, None, None),
        )
        (figures.topics if row["whole_window"] else figures.hours).append(delivery)
    # Counts do add up: the whole window's are summed here rather than in Spark.
    counts = [(row["figure"], Count(row["topic"], _hour(row["hour"]), row["key"],
                                    int(row["count"]))) for row in keyed]
    totals: dict[tuple[str, str, str], int] = defaultdict(int)
    for figure, count in counts:
        totals[(figure, count.topic, count.key)] += count.events
    counts += [(figure, Count(topic, None, key, events))
               for (figure, topic, key), events in totals.items()]
    counts.sort(key=lambda fc: (fc[1].topic, fc[1].hour is not None, fc[1].hour or _EPOCH,
                                -fc[1].events, fc[1].key))
    for figure, count in counts:
        (figures.attempts if figure == "attempts" else figures.dead_errors).append(count)
    return figures


def _live_frame(spark: Any, request: ReportRequest) -> Any:
    store = OutboxStore(request.using)
    selection = ClosedRowSelection(statuses=CLOSED, since=request.since,
                                   before=request.until)
    stats = store.selection_stats(selection)
    if not stats:
        return spark.createDataFrame([], archive_schema())
    frozen = ClosedRowSelection(
        statuses=CLOSED, since=request.since, before=request.until,
        id_range=(min(s.min_id for s in stats), max(s.max_id for s in stats)),
    )
    rows = sum(s.rows for s in stats)
    partitions = request.partitions or max(int(spark.sparkContext.defaultParallelism),
                                           -(-rows // 500_000))
    return read_outbox(spark, outbox_source(store.alias), store.dialect, frozen,
                       partitions=partitions, fetch_size=request.fetch_size)


def report(request: ReportRequest, progress: Progress | None = None) -> Figures:
    """Compute the figures and write ``index.html``, the plots and ``figures.csv`` to
    ``request.out``."""
    # Here, not at the top: report_files imports matplotlib, which --help does without.
    from .report_files import write_report

    say = progress or (lambda message: None)
    settings = get_settings()
    with spark_session(outbox_source(request.using), settings.spark, request.master) as spark:
        if request.path is None:
            say("Reading closed rows from the outbox table through JDBC ...")
            frame = _live_frame(spark, request)
            source = f"the outbox table (database {request.using or settings.database!r})"
            erasures = None
        else:
            say(f"Reading the committed archive at {request.path} ...")
            files = ArchiveFiles(spark, request.path)
            files.require_committed()
            frame = read_committed(spark, files, since=request.since, until=request.until)
            source = f"the archive at {request.path}"
            erasures = erasure_count(files)
        figures = compute(frame, source, request.since, request.until)
        figures.erasures = erasures
    say(f"Computed figures for {len(figures.topics)} topic(s), {figures.events:,} event(s); "
        "writing the report ...")
    write_report(figures, request.out)
    return figures
