"""The SQL of ``publish_event()``: the multi-row INSERT of new events and the look-up of
message ids already taken. A part of the vendor's dialect (``dialect.inserts``); each
vendor module subclasses it where its spelling differs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, TypeVar

from .ops import SqlOps
from .tables import INSERT_COLUMNS, JSON_COLUMNS, VERSIONED_INSERT_COLUMNS

T = TypeVar("T")




class InsertSql:
    """The INSERT of new events into one outbox (the dialect's)."""

    #: The placeholder for a JSON value; PostgreSQL casts, the others convert implicitly.
    json_placeholder: ClassVar[str] = "%s"

    def __init__(self, ops: SqlOps) -> None:
        self.ops = ops

    # Django's cursors take %s placeholders on every backend (pyodbc's ? and sqlite's ?
    # are substituted by the backend), so a literal % in DML is written %%.
    def insert_sql(self, rows: int, *, scheduled: bool = False, versioned: bool = False
                   ) -> str:
        """A multi-row INSERT of :data:`INSERT_COLUMNS` (``versioned``: of
        :data:`VERSIONED_INSERT_COLUMNS`) with Django ``%s`` placeholders; bind it with
        :meth:`insert_params`. ``scheduled`` adds ``next_retry_at``, each row's
        :meth:`delivery_sql` (bound by :meth:`delivery_params`, after the row's other
        values)."""
        return self.ops.statement(
            ("insert", rows, scheduled, versioned),
            lambda: self.build_insert_sql(rows, scheduled=scheduled, versioned=versioned),
        )

    def build_insert_sql(self, rows: int, *, scheduled: bool = False,
                         versioned: bool = False) -> str:
        inserted = VERSIONED_INSERT_COLUMNS if versioned else INSERT_COLUMNS
        columns, values = inserted, [
            self.json_placeholder if c in JSON_COLUMNS else "%s" for c in inserted
        ]
        if scheduled:
            columns, values = (*columns, "next_retry_at"), [*values, self.delivery_sql()]
        row = "(" + ", ".join(values) + ")"
        return (
            f"INSERT INTO {self.ops.table} ({self.ops.columns(columns)}) VALUES "
            + ", ".join([row] * rows)
        )

    def delivery_sql(self) -> str:
        """When a scheduled row may first be claimed: the bound time (``deliver_at``), or
        else the database's now plus the bound delay; NULL when neither is bound (a row
        published for now in the same INSERT). A pending row with a future
        ``next_retry_at`` is left alone by the claim until the database's clock passes
        it (see ``Dialect.overdue_sql``)."""
        return f"COALESCE({self.ops.timestamp_placeholder}, {self.delay_sql()})"

    def delay_sql(self) -> str:
        """The database's UTC now plus a bound delay of any length (bound by
        :meth:`delay_params`); NULL when the delay is NULL."""
        return self.ops.now_plus_sql()

    def delay_params(self, milliseconds: int | None) -> list[Any]:
        """The parameters of :meth:`delay_sql` for ``milliseconds`` (None: no delay)."""
        return [None if milliseconds is None else self.ops.offset_param(milliseconds)]

    def delivery_params(self, at: Any, delay_ms: int | None) -> list[Any]:
        """The parameters of :meth:`delivery_sql`: ``at`` a bound time or None."""
        return [at, *self.delay_params(delay_ms)]

    def insert_params(self, values: list[Any]) -> list[Any]:
        """The parameters of :meth:`insert_sql`: the rows' values, flattened."""
        return values

    def stored_message_ids(self, cursor: Any, message_ids: Sequence[str]) -> list[str]:
        """Which of ``message_ids`` the table holds already (a unique index seek each)."""
        q = self.ops.quote
        cursor.execute(
            f"SELECT {q('message_id')} FROM {self.ops.table} "
            f"WHERE {q('message_id')} IN ({', '.join(['%s'] * len(message_ids))})",
            list(message_ids),
        )
        return [str(row[0]) for row in cursor.fetchall()]
