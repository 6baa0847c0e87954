"""The SQL of ``publish_event()``: the multi-row INSERT of new events and the look-up of
message ids already taken. A part of the vendor's dialect (``dialect.inserts``); each
vendor module subclasses it where its spelling differs."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

from ..naming import TableName
from .tables import INSERT_COLUMNS, JSON_COLUMNS

T = TypeVar("T")


class InsertsDialect(Protocol):
    """What the insert SQL takes from the vendor's dialect."""

    name: TableName
    table: str

    def quote(self, identifier: str) -> str: ...

    def columns(self, names: Sequence[str]) -> str: ...

    def statement(self, key: Hashable, build: Callable[[], T]) -> T: ...


class InsertSql:
    """The INSERT of new events into one outbox (the dialect's)."""

    #: The placeholder for a JSON value; PostgreSQL casts, the others convert implicitly.
    json_placeholder: ClassVar[str] = "%s"

    def __init__(self, dialect: InsertsDialect) -> None:
        self.name = dialect.name
        self.table = dialect.table
        self.quote = dialect.quote
        self.columns = dialect.columns
        self.statement = dialect.statement

    # Django's cursors take %s placeholders on every backend (pyodbc's ? and sqlite's ?
    # are substituted by the backend), so a literal % in DML is written %%.
    def insert_sql(self, rows: int) -> str:
        """A multi-row INSERT of :data:`INSERT_COLUMNS` with Django ``%s`` placeholders;
        bind it with :meth:`insert_params`."""
        return self.statement(("insert", rows), lambda: self.build_insert_sql(rows))

    def build_insert_sql(self, rows: int) -> str:
        row = "(" + ", ".join(
            self.json_placeholder if c in JSON_COLUMNS else "%s" for c in INSERT_COLUMNS
        ) + ")"
        return (
            f"INSERT INTO {self.table} ({self.columns(INSERT_COLUMNS)}) VALUES "
            + ", ".join([row] * rows)
        )

    def insert_params(self, values: list[Any]) -> list[Any]:
        """The parameters of :meth:`insert_sql`: the rows' values, flattened."""
        return values

    def stored_message_ids(self, cursor: Any, message_ids: Sequence[str]) -> list[str]:
        """Which of ``message_ids`` the table holds already (a unique index seek each)."""
        q = self.quote
        cursor.execute(
            f"SELECT {q('message_id')} FROM {self.table} "
            f"WHERE {q('message_id')} IN ({', '.join(['%s'] * len(message_ids))})",
            list(message_ids),
        )
        return [str(row[0]) for row in cursor.fetchall()]
