"""The outbox table read through Spark's JDBC source, split into id ranges.

The selection's id range comes from a freeze (``MIN(id)``/``MAX(id)`` of the same
selection), so ``lowerBound``/``upperBound`` split exactly the rows selected and the
parallel reads cannot see a row the freeze did not count. Columns arrive with the
archive's types whatever the driver maps them to.
"""

from __future__ import annotations

from typing import Any

from ..store.base import Dialect
from ..store.closed_rows import TIMESTAMP_COLUMNS, ClosedRowSelection
from .jdbc import JdbcSource
from .layout import RUN_PARTITION
from .reader import archive_schema


def read_outbox(
    spark: Any,
    source: JdbcSource,
    dialect: Dialect,
    selection: ClosedRowSelection,
    *,
    partitions: int,
    fetch_size: int,
) -> Any:
    """A DataFrame of the selected rows with the archive's columns (no run id) and the
    ``day`` of processed_at; ``selection.id_range`` must be set."""
    from pyspark.sql import functions as F

    if selection.id_range is None:
        raise ValueError("read_outbox needs a frozen selection (id_range).")
    low, high = selection.id_range
    text = "STRING" if dialect.closed_rows.archive_timestamps_as_text else "TIMESTAMP"
    custom = ", ".join(["id BIGINT", "status INT", "attempts INT",
                        *(f"{c} {text}" for c in TIMESTAMP_COLUMNS)])
    frame = (
        spark.read.format("jdbc").options(**source.options())
        .option("dbtable", dialect.closed_rows.source_sql(selection))
        .option("partitionColumn", "id").option("lowerBound", str(low))
        .option("upperBound", str(high + 1)).option("numPartitions", str(partitions))
        .option("fetchsize", str(fetch_size))
        .option("customSchema", custom)
        .load()
    )
    return frame.select(*[
        F.col(f.name).cast(f.dataType).alias(f.name)
        for f in archive_schema().fields if f.name not in (RUN_PARTITION, "day")
    ]).withColumn("day", F.to_date("processed_at"))
