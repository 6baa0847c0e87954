"""Reading an archive: committed runs only (a Delta table's current version: see
:mod:`.delta_reader`).

The data of every run lies under ``ROOT/archive_run_id=RUN/``; a run is committed when
``ROOT/_manifests/RUN.json`` exists. A crash can leave a run directory without its
manifest (until the next archive run removes it), so readers filter on the committed
run ids. Any Spark user does the same in three lines::

    committed = [r.run_id for r in spark.read.json(f"{root}/_manifests", multiLine=True)
                 .select("run_id").collect()]
    events = spark.read.parquet(root).where(F.col("archive_run_id").isin(committed))
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from .columns import archive_schema
from .layout import RUN_PARTITION
from .storage import ArchiveFiles

__all__ = ["archive_schema", "read_committed"]

def read_committed(
    spark: Any,
    files: ArchiveFiles,
    *,
    topics: Sequence[str] = (),
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    run_ids: Sequence[str] | None = None,
) -> Any:
    """A DataFrame of the committed runs' rows (or of ``run_ids`` among them), with
    ``topics`` and the ``[since, until)`` window of ``processed_at`` pruned by
    partition (topic, day) before any file is opened."""
    from pyspark.sql import functions as F

    if files.exists(files.layout.delta_log):
        from .delta_reader import read_delta

        return read_delta(spark, files.layout.root, topics=topics, since=since, until=until,
                          run_ids=run_ids)
    committed = [m.run_id for m in files.manifests()]
    if run_ids is not None:
        committed = [r for r in committed if r in set(run_ids)]
    if not committed:
        return spark.createDataFrame([], archive_schema())
    frame = spark.read.schema(archive_schema()).parquet(files.layout.root)
    frame = frame.where(F.col(RUN_PARTITION).isin(committed))
    if topics:
        frame = frame.where(F.col("topic").isin(list(topics)))
    if since is not None:
        frame = frame.where((F.col("day") >= F.lit(since.astimezone(dt.UTC).date()))
                            & (F.col("processed_at") >= F.lit(since)))
    if until is not None:
        frame = frame.where((F.col("day") <= F.lit(until.astimezone(dt.UTC).date()))
                            & (F.col("processed_at") < F.lit(until)))
    return frame
