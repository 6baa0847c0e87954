"""SQL over closed rows (done and dead) for the history pipeline: the archive's frozen
selection, the text Spark's JDBC source reads, and the exact purge of archived rows.

Spark's JDBC source takes SQL text, not parameters, so the selection is rendered with
literals. Every literal comes from a typed value this package computed (an ``int``, a
UTC ``datetime``, a status code), never from user text. The freeze and Spark's read use
the same rendering, so they select the same rows.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..contract import CLOSED
from ..exceptions import EventferryError
from .ops import SqlOps
from .tables import BUCKET, COLUMNS

#: The columns an archive holds: every column of the outbox, in the contract's order, but
#: the bucket (the relays' share-out, derived from the aggregate: no part of the event's
#: history). Archives written by development builds before 0.1.0 may lack
#: ``schema_version``; the reader, which reads with this schema, gives their rows a null.
ARCHIVE_COLUMNS: tuple[str, ...] = tuple(column.name for column in COLUMNS
                                         if column is not BUCKET)
#: The archive's timestamp columns, in the same order.
TIMESTAMP_COLUMNS: tuple[str, ...] = tuple(
    c.name for c in COLUMNS if c.kind == "timestamp")

#: The id checksum's second term: with the count and the sum of ids, a lost row and a
#: duplicated one cannot cancel out unless they also agree on this. Both moduli are
#: primes below 2**16, so a term stays below 2**32 and the sum fits a BIGINT.
CHECKSUM_MODULI = (65521, 65519)


@dataclass(frozen=True)
class ArchivedSpan:
    """What one committed archive run holds: every row with ``id <= max_id``,
    ``processed_at < cutoff`` and a status in ``statuses`` at the time it froze."""

    max_id: int
    cutoff: dt.datetime
    statuses: tuple[int, ...]


@dataclass(frozen=True)
class ClosedRowSelection:
    """Closed rows in ``statuses`` processed in ``[since, before)``, outside every
    ``archived`` span, and (once frozen) with ids in ``id_range``."""

    statuses: tuple[int, ...] = CLOSED
    before: dt.datetime | None = None
    since: dt.datetime | None = None
    archived: tuple[ArchivedSpan, ...] = ()
    id_range: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if not self.statuses or not set(self.statuses) <= set(CLOSED):
            raise ValueError(f"closed statuses are {CLOSED}, got {self.statuses!r}")


@dataclass(frozen=True)
class SelectionStats:
    """Counts and the id checksum of a selection, per (topic, status)."""

    topic: str
    status: int
    rows: int
    min_id: int
    max_id: int
    id_sum: int
    id_mix: int


#: Rows, sum of ids and sum of mixed ids (:data:`CHECKSUM_MODULI`) of a set of rows.
IdChecksum = tuple[int, int, int]


def selection_checksum(stats: Sequence[SelectionStats]) -> IdChecksum:
    """The checksum of a whole selection from its per (topic, status) stats."""
    return (sum(s.rows for s in stats), sum(s.id_sum for s in stats),
            sum(s.id_mix for s in stats))


def codes(statuses: Sequence[int]) -> str:
    """Status codes as a SQL list; they are ints, never user text."""
    return ", ".join(str(int(s)) for s in statuses)


class ClosedRowsSql:
    """The history pipeline's SQL over one outbox table: a part of the vendor's dialect
    (``dialect.closed_rows``), not a base of it. Each vendor module subclasses it to
    spell the hooks below."""

    #: The database's UTC clock as the value :meth:`utc_now` reads (the dialect's
    #: ``now_sql`` unless the vendor hands that back in a session time zone).
    utc_now_sql: ClassVar[str | None] = None

    def __init__(self, ops: SqlOps) -> None:
        self.ops = ops

    def utc_now(self, cursor: Any) -> dt.datetime:
        """The database's clock, which stamps processed_at: a cutoff taken from it can
        never lie after a row processed later, whatever the application's clock says."""
        # An empty parameter list, so the backend unescapes the %% of SQLite's strftime.
        cursor.execute(f"SELECT {self.utc_now_sql or self.ops.now_sql}", [])
        (value,) = cursor.fetchone()
        now: dt.datetime = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
        if now.tzinfo is None:
            now = now.replace(tzinfo=dt.UTC)
        return now.astimezone(dt.UTC)

    # -- spelling hooks ----------------------------------------------------------------
    #: Whether :meth:`archive_column_sql` hands Spark timestamps as UTC text. JDBC turns
    #: a zone-less DATETIME into an instant with the JVM's time zone; text read back in
    #: Spark's UTC session cannot be shifted that way.
    archive_timestamps_as_text: ClassVar[bool] = True

    def utc_literal(self, value: dt.datetime) -> str:
        """A UTC time (millisecond precision) as a literal comparable with the columns."""
        raise NotImplementedError

    def timestamp_sql(self, column: str, alias: str = "") -> str:
        """A timestamp column (of table ``alias``) as the comparisons read it."""
        return f"{alias}.{self.ops.quote(column)}" if alias else self.ops.quote(column)

    def timestamp_text_sql(self, column: str) -> str:
        """A timestamp column as ``YYYY-MM-DD HH:MM:SS.fff`` UTC text."""
        raise NotImplementedError

    def archive_column_sql(self, column: str) -> str:
        """How Spark reads ``column`` (JSON as text, timestamps per
        :attr:`archive_timestamps_as_text`)."""
        if column in TIMESTAMP_COLUMNS and self.archive_timestamps_as_text:
            return f"{self.timestamp_text_sql(column)} AS {self.ops.quote(column)}"
        return self.ops.quote(column)

    def sum_sql(self, expression: str) -> str:
        return f"SUM({expression})"

    # -- rendering -----------------------------------------------------------------------
    def selection_condition(self, selection: ClosedRowSelection) -> str:
        q = self.ops.quote
        processed_at = self.timestamp_sql("processed_at")
        parts = [f"{q('status')} IN ({codes(selection.statuses)})"]
        if selection.before is not None:
            parts.append(f"{processed_at} < {self.utc_literal(selection.before)}")
        if selection.since is not None:
            parts.append(f"{processed_at} >= {self.utc_literal(selection.since)}")
        if selection.archived:
            spans = " OR ".join(
                f"({q('id')} <= {int(span.max_id)} AND {processed_at} < "
                f"{self.utc_literal(span.cutoff)} AND {q('status')} IN ({codes(span.statuses)}))"
                for span in selection.archived
            )
            parts.append(f"NOT ({spans})")
        if selection.id_range is not None:
            low, high = selection.id_range
            parts.append(f"{q('id')} >= {int(low)} AND {q('id')} <= {int(high)}")
        return " AND ".join(parts)

    def checksum_terms_sql(self) -> tuple[str, str]:
        """The id checksum as SQL: the sum of ids and the sum of the mixed ids."""
        q = self.ops.quote
        first, second = CHECKSUM_MODULI
        mix = f"({q('id')} % {first}) * ({q('id')} % {second})"
        return self.sum_sql(q("id")), self.sum_sql(mix)

    def selection_stats_sql(self, selection: ClosedRowSelection) -> str:
        """Per (topic, status): rows, MIN(id), MAX(id) and the id checksum; one scan."""
        q = self.ops.quote
        id_sum, id_mix = self.checksum_terms_sql()
        return (
            f"SELECT {q('topic')}, {q('status')}, COUNT(*), MIN({q('id')}), MAX({q('id')}), "
            f"{id_sum}, {id_mix} FROM {self.ops.table} "
            f"WHERE {self.selection_condition(selection)} "
            f"GROUP BY {q('topic')}, {q('status')}"
        )

    def selection_stats(self, cursor: Any, selection: ClosedRowSelection) -> list[SelectionStats]:
        # No parameters: the text is complete, and %-signs in it stay as they are.
        cursor.execute(self.selection_stats_sql(selection))
        return [
            SelectionStats(str(topic), int(status), int(rows), int(low), int(high),
                           int(id_sum), int(id_mix))
            for topic, status, rows, low, high, id_sum, id_mix in cursor.fetchall()
        ]

    def source_sql(self, selection: ClosedRowSelection) -> str:
        """The selection as a derived table for Spark's JDBC ``dbtable`` option; Spark
        adds its id-range predicates around it."""
        columns = ", ".join(self.archive_column_sql(c) for c in ARCHIVE_COLUMNS)
        return (
            f"(SELECT {columns} FROM {self.ops.table} "
            f"WHERE {self.selection_condition(selection)}) eventferry_source"
        )

    # -- purge of archived rows --------------------------------------------------------
    #: The widest id range :meth:`purge_selection_sql` may delete in one statement, where
    #: the vendor bounds the rows a statement deletes (None: no bound).
    max_purge_range_ids: ClassVar[int | None] = None

    def purge_selection_sql(self, selection: ClosedRowSelection) -> str:
        """The DELETE of every row of ``selection``: a committed run's frozen selection
        narrowed to one id range, whose rows the archive holds."""
        return f"DELETE FROM {self.ops.table} WHERE {self.selection_condition(selection)}"

    def purge_selection(
        self, cursor: Any, selection: ClosedRowSelection, archived: IdChecksum
    ) -> int | None:
        """Delete the rows of ``selection`` if they are exactly the ``archived`` ones
        (same count and id checksum), or nothing; in the caller's transaction. Returns
        rows deleted, or None when they differ: rows left the selection after the
        archive read it, or a purge already took some, and only the keyed purge
        (:meth:`purge_archived`) is exact then.

        Rows only ever leave a frozen selection, so the DELETE takes at most the rows the
        check counted; more would mean that promise broke, and raises (rolling back)."""
        if selection_checksum(self.selection_stats(cursor, selection)) != archived:
            return None
        # No parameters: the text is complete, and %-signs in it stay as they are.
        cursor.execute(self.purge_selection_sql(selection))
        deleted = int(cursor.rowcount)
        if deleted > archived[0]:
            raise EventferryError(f"The purge of ids {selection.id_range} deleted {deleted:,} "
                               f"rows where {archived[0]:,} were archived; rolled back.")
        return deleted

    def archived_key_text(self, value: dt.datetime) -> str:
        """A processed_at as the purge's key list spells it (UTC, milliseconds)."""
        return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]

    def purge_archived_sql(self, statuses: Sequence[int]) -> str:
        """The DELETE of archived rows still in ``statuses``, keyed by
        :meth:`purge_archived_params`."""
        raise NotImplementedError

    def purge_archived_params(self, rows: Sequence[tuple[int, dt.datetime]]) -> list[Any]:
        """The archived rows as one JSON array of ``[id, "processed_at"]`` pairs: one
        parameter however many rows (SQL Server takes 2,100 parameters at most)."""
        return [json.dumps([[row_id, self.archived_key_text(at)] for row_id, at in rows])]

    def purge_archived(
        self, cursor: Any, rows: Sequence[tuple[int, dt.datetime]], statuses: Sequence[int]
    ) -> int:
        """Delete exactly these (id, processed_at) rows if still in ``statuses``; rows
        redriven, re-processed or already gone are left alone. Returns rows deleted."""
        cursor.execute(self.purge_archived_sql(statuses), self.purge_archived_params(rows))
        return int(cursor.rowcount)
