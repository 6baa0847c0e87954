"""The archive's columns as Spark types: what every format's files hold and every
reader hands on."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..store.closed_rows import ARCHIVE_COLUMNS, TIMESTAMP_COLUMNS
from .layout import RUN_PARTITION

_INTEGER_COLUMNS = {"id": "long", "status": "integer", "attempts": "integer"}


def archive_schema(without: Collection[str] = ()) -> Any:
    """The archive's columns as Spark types, partition columns last (run, topic, day);
    ``without`` leaves some out (what a data file holds, say)."""
    from pyspark.sql.types import StructType

    schema = StructType()
    for column in ARCHIVE_COLUMNS:
        if column == "topic":
            continue
        kind = ("timestamp" if column in TIMESTAMP_COLUMNS
                else _INTEGER_COLUMNS.get(column, "string"))
        schema = schema.add(column, kind, nullable=column not in ("id", "message_id"))
    schema = (schema.add(RUN_PARTITION, "string", nullable=False)
              .add("topic", "string", nullable=False).add("day", "date", nullable=False))
    return StructType([f for f in schema.fields if f.name not in without])
