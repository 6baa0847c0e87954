"""Spark reading a Delta archive without Delta's Spark jars: delta-rs names the files of
a version and their partition values, Spark reads exactly those files.

A file's partition values come from the log, never from its directory name: Spark and
delta-rs escape a topic differently in the path (``odd%2Ftopic: ü`` against
``odd%2Ftopic%3A%20%C3%BC``). Each row is matched to its file's values by the file's
path, which Spark reports URL-encoded and the log holds decoded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from .columns import archive_schema
from .delta import DataFile, DeltaArchive, without_file_scheme
from .layout import RUN_PARTITION

#: Characters Hadoop reads as a glob pattern in a path handed to Spark.
_GLOB_CHARACTERS = "\\{}[]*?"


def glob_escaped(path: str) -> str:
    """A file's path for ``spark.read``: globbing characters escaped, so a topic such
    as ``a[1]`` names its file, not a pattern."""
    return "".join(f"\\{c}" if c in _GLOB_CHARACTERS else c for c in path)


def decoded_path_column() -> Any:
    """The file a row came from, as a path (Spark reports it URL-encoded; a ``+`` in it
    is a plus, not the space ``url_decode`` would make it)."""
    from pyspark.sql import functions as F

    return F.url_decode(F.regexp_replace(F.col("_metadata.file_path"), r"\+", "%2B"))


def _selected(files: Sequence[DataFile], topics: Sequence[str], since: dt.datetime | None,
              until: dt.datetime | None) -> list[DataFile]:
    """The files whose partition can hold rows of the topics and the window."""
    first = None if since is None else since.astimezone(dt.UTC).date().isoformat()
    last = None if until is None else until.astimezone(dt.UTC).date().isoformat()
    return [f for f in files
            if (not topics or f.topic in topics)
            and (first is None or f.day >= first) and (last is None or f.day <= last)]


def read_delta(
    spark: Any,
    root: str,
    *,
    topics: Sequence[str] = (),
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    run_ids: Sequence[str] | None = None,
    version: int | None = None,
) -> Any:
    """A DataFrame of the table's rows (of ``version``, the latest by default) with the
    archive's columns, pruned by topic and day before any file is opened."""
    from pyspark.sql import functions as F

    schema = archive_schema()
    archive = DeltaArchive(root)
    files = _selected(archive.data_files(archive.table(version)), topics, since, until)
    if not files:
        return spark.createDataFrame([], schema)
    data_schema = archive_schema(without=("topic", "day"))
    base = root.rstrip("/")
    local = without_file_scheme(base)
    partitions = spark.createDataFrame(
        [(f"{local}/{f.path}", f.topic, dt.date.fromisoformat(f.day)) for f in files],
        "_file string, topic string, day date",
    )
    paths = [glob_escaped(f"{base}/{f.path}") for f in files]
    frame = (spark.read.schema(data_schema).parquet(*paths)
             .withColumn("_file", F.regexp_replace(decoded_path_column(), "^file:/+", "/"))
             .join(F.broadcast(partitions), "_file").drop("_file")
             .select(*[f.name for f in schema.fields]))
    if run_ids is not None:
        frame = frame.where(F.col(RUN_PARTITION).isin(list(run_ids)))
    if topics:
        frame = frame.where(F.col("topic").isin(list(topics)))
    if since is not None:
        frame = frame.where(F.col("processed_at") >= F.lit(since))
    if until is not None:
        frame = frame.where(F.col("processed_at") < F.lit(until))
    return frame
