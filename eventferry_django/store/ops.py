"""How one vendor spells the SQL that every part of its dialect writes: a part reaches it
as ``self.ops``, as the parts of a Django backend reach ``connection.ops``. Identifiers,
the database's clock, bound times and id lists, the locking clause, which errors mean
"try again", and the statements kept built for the relay's every pass."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, ClassVar, TypeVar

from ..naming import QUOTES, TableName
from .sql import Fragment

T = TypeVar("T")


class SqlOps:
    """The spelling of one vendor for one outbox (named at construction); each vendor
    module subclasses it where its spelling differs."""

    vendor: ClassVar[str]
    #: The database's current UTC time, evaluated once per statement.
    now_sql: ClassVar[str]
    #: The placeholder of a bound time (a lease token, purge's cutoff).
    timestamp_placeholder: ClassVar[str] = "%s"
    #: The locking clause of a scan that takes rows no other transaction holds (vendors
    #: with SKIP LOCKED).
    skip_locked_sql: ClassVar[str] = ""
    #: How a query asks for its first row only: before the columns, after ORDER BY.
    first_row: ClassVar[tuple[str, str]] = ("", " LIMIT 1")
    #: A statement that opens each of the relay's own transactions, tuning them: above
    #: all, letting them commit without waiting for the disk. Losing such a commit in a
    #: database crash only makes rows come back (a claim or ack undone means the event is
    #: published again), never loses an event, so the relay need not pay a durable
    #: commit per batch.
    relay_transaction_sql: ClassVar[str | None] = None

    def __init__(self, name: TableName, *, native_json: bool = False) -> None:
        self.name = name.for_vendor(self.vendor)
        self.native_json = native_json
        #: The outbox's quoted, schema-qualified name.
        self.table = self.name.quoted(self.vendor)
        self._statements: dict[Hashable, Any] = {}

    # -- identifiers ---------------------------------------------------------------------
    def quote(self, identifier: str) -> str:
        opening, closing = QUOTES[self.vendor]
        return f"{opening}{identifier}{closing}"

    def columns(self, names: Sequence[str]) -> str:
        return ", ".join(self.quote(n) for n in names)

    # -- values --------------------------------------------------------------------------
    # Django's cursors take %s placeholders on every backend (pyodbc's ? and sqlite's ?
    # are substituted by the backend), so a literal % in DML is written %%.

    def deleted_column(self, column: str) -> tuple[str, str] | None:
        """How a DELETE hands back ``column`` of each row it deleted: a clause after the
        table's name and one at the end (one row back means one deleted, where a row
        count may lie: SQL Server's NOCOUNT); None where a DELETE cannot (MySQL)."""
        return "", f" RETURNING {self.quote(column)}"

    def now_plus_sql(self) -> str:
        """The database's UTC now plus a bound offset (see :meth:`offset_param`)."""
        raise NotImplementedError

    def offset_param(self, milliseconds: int) -> Any:
        """The bound value for :meth:`now_plus_sql` that means ``milliseconds``."""
        return milliseconds

    def now_plus(self, offset: Any) -> Fragment:
        """The database's UTC now plus ``offset`` (see :meth:`offset_param`)."""
        return self.now_plus_sql(), [offset]

    def select_column(self, column: str, alias: str = "o") -> str:
        """How a row's column is read back (a cast where the driver would decode)."""
        return f"{alias}.{self.quote(column)}"

    def ids_condition(self, ids: Sequence[Any]) -> Fragment:
        """``id`` restricted to ``ids``, as SQL and its parameters."""
        return f"{self.quote('id')} IN ({', '.join(['%s'] * len(ids))})", list(ids)

    # -- running -------------------------------------------------------------------------
    def statement(self, key: Hashable, build: Callable[[], T]) -> T:
        """SQL (text, or a :data:`~.sql.Fragment` whose changing values are slots) that
        depends only on this outbox (and ``key``): built on first use, so the relay's
        every-pass statements cost no string building."""
        if key not in self._statements:
            self._statements[key] = build()
        return self._statements[key]  # type: ignore[no-any-return]

    def execute_often(self, cursor: Any, sql: str, params: Sequence[Any]) -> Any:
        """Run one of the relay's every-pass statements; returns the cursor to read.
        Vendors that can keep such statements prepared override this."""
        cursor.execute(sql, params)
        return cursor

    def is_transient(self, exc: BaseException) -> bool:
        """Whether ``exc`` (a ``django.db.Error``) means "try the same again": a deadlock
        victim, a serialization failure, a lock wait that timed out."""
        return False
