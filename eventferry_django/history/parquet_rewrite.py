"""Rewriting Parquet files of an archive without some of their rows, crash-safe.

Parquet files cannot be changed in place, so each affected file is replaced:

1. Spark reads the affected files, drops the rows, and writes what is left of file
   number *i* to ``STAGING/f=i/`` in one job; the job's ``_SUCCESS`` marks it whole.
2. Then, file by file: the original is deleted and its replacement moved into the
   original's directory (a file whose rows all went has no replacement).

A crash in 1 leaves the originals as they were: the rerun writes the staging again. A
crash in 2 leaves each file either not yet replaced (original there), replaced (moved
replacement there), or between the two (original gone, replacement still staged): the
rerun finishes each from where it is. Readers never see a row twice; between the
deletion and the move they miss one file's other rows for a moment.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .columns import archive_schema
from .delta_reader import decoded_path_column, glob_escaped
from .layout import RUN_PARTITION
from .storage import ArchiveFiles

Progress = Callable[[str], None]


def rewrite_without(spark: Any, files: ArchiveFiles, paths: Sequence[str], keep: Any,
                    staging: str, progress: Progress) -> int:
    """Replace each file of ``paths`` (Hadoop path strings) by its rows that match
    ``keep`` (a Spark condition); returns how many files were replaced."""
    from pyspark.sql import functions as F

    if not files.exists(f"{staging}/_SUCCESS"):
        files.delete(staging)
        numbered = spark.createDataFrame([(p, i) for i, p in enumerate(paths)],
                                         "_file string, f int")
        data_schema = archive_schema(without=(RUN_PARTITION, "topic", "day"))
        frame = (spark.read.schema(data_schema).parquet(*[glob_escaped(p) for p in paths])
                 .withColumn("_file", decoded_path_column())
                 .join(F.broadcast(numbered), "_file").drop("_file").where(keep))
        progress(f"Rewriting {len(paths)} Parquet file(s) without the erased rows ...")
        frame.write.partitionBy("f").parquet(staging)
    for index, path in enumerate(paths):
        if files.exists(path):
            files.delete(path)
        staged = f"{staging}/f={index}"
        if files.exists(staged):
            directory = path.rsplit("/", 1)[0]
            for replacement in files.files_under(staged):
                files.rename(replacement, f"{directory}/{replacement.rsplit('/', 1)[1]}")
    files.delete(staging)
    return len(paths)
