"""What every vendor's SQL has in common: the tables' shapes and the dialect interface.

Each table (the outbox, the consumers' inbox) is described once here as a :class:`Table`:
columns, constraints and indexes. Every dialect renders any table with the same code;
each vendor module says how its dialect spells them (types, quoting, guards) and holds
all of its own SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..contract import (
    CLAIMED,
    DEAD,
    DONE,
    FAILED,
    MAX_BATCH,
    PENDING,
)
from ..naming import QUOTES, TableName
from .sql import HEADS, LEASE_OFFSET, Fragment, compose, param
from .tables import (
    CLAIM_COLUMNS,
    CLOSED_STATUSES_SQL,
    INBOX_KEY,
    INSERT_COLUMNS,
    JSON_COLUMNS,
    OPEN_STATUSES_SQL,
    Column,
    Index,
    Table,
    closed_rows_index,
    contract_indexes,
    first_release_probe_index,
    inbox_table,
    outbox_table,
)

if TYPE_CHECKING:
    from .closed_rows import ClosedRowsSql

T = TypeVar("T")


class Dialect:
    """All SQL of one vendor: the DDL of any :class:`Table`, the outbox's operations
    (for the outbox named at construction) and the inbox's.

    Subclasses set the class attributes and override the hooks whose spelling differs;
    rendering the shared shape happens here once. The history pipeline's SQL is a part
    of its own, :attr:`closed_rows` (a ``closed_rows_class``).
    """

    vendor: ClassVar[str]
    closed_rows_class: ClassVar[type[ClosedRowsSql]]
    #: The database's current UTC time, evaluated once per statement.
    now_sql: ClassVar[str]
    COLUMN_TYPES: ClassVar[Mapping[str, str]]
    DEFAULTS: ClassVar[Mapping[str, str]]
    #: Whether ``CREATE INDEX ... INCLUDE (...)`` exists; without it the included
    #: columns become trailing key columns, which covers the same queries.
    supports_include: ClassVar[bool] = False
    #: Whether filtered (partial) indexes exist.
    supports_partial_index: ClassVar[bool] = True
    #: How the first release keyed its head-of-aggregate index: ``(aggregate_id,
    #: status, id)``, or SQL Server's ``(aggregate_id, id) INCLUDE (status)``. Only
    #: migration 0005's reverse builds that index now.
    status_keyed_probe: ClassVar[bool] = True
    #: Whether migration 0007 replaces the unfiltered retention index with one filtered
    #: on the closed statuses. Not on MariaDB/MySQL (no filtered indexes: the claim names
    #: the indexes it walks instead), nor on SQLite, whose planner uses a partial index
    #: only for a WHERE term identical to its filter (``status = 2`` does not match
    #: ``status IN (2, 4)``, so purge would lose its index), and which plans without
    #: statistics unless ANALYZE was run.
    filtered_retention_index: ClassVar[bool] = False

    def __init__(self, name: TableName, *, native_json: bool = False) -> None:
        self.name = name.for_vendor(self.vendor)
        self.native_json = native_json
        self.table = self.name.quoted(self.vendor)
        self._statements: dict[Hashable, Any] = {}
        #: The history pipeline's SQL over this outbox.
        self.closed_rows = self.closed_rows_class(self)

    # -- identifiers and literals ------------------------------------------------------
    def quote(self, identifier: str) -> str:
        opening, closing = QUOTES[self.vendor]
        return f"{opening}{identifier}{closing}"

    def columns(self, names: Sequence[str]) -> str:
        return ", ".join(self.quote(n) for n in names)

    # -- DDL ---------------------------------------------------------------------------
    # Every DDL method takes the table it renders; left out, that is this dialect's outbox.
    @property
    def outbox(self) -> Table:
        return outbox_table(self.name, self.indexes())

    def inbox(self, name: TableName) -> Table:
        """The inbox named ``name`` (with this vendor's default schema filled in)."""
        return inbox_table(name.for_vendor(self.vendor))

    def qualified(self, table: Table) -> str:
        """The table's quoted, schema-qualified name."""
        return table.name.quoted(self.vendor)

    def column_type(self, column: Column) -> str:
        return self.COLUMN_TYPES[column.kind]

    def default_clause(self, table: Table, column: Column) -> str:
        assert column.default is not None
        return f" DEFAULT {self.DEFAULTS[column.default]}"

    def column_definition(self, table: Table, column: Column) -> str:
        definition = f"{self.quote(column.name)} {self.column_type(column)}"
        if column.kind != "id":
            definition += " NULL" if column.nullable else " NOT NULL"
        if column.default is not None:
            definition += self.default_clause(table, column)
        return definition

    def json_check(self, column: str) -> str | None:
        """A CHECK expression that the column holds valid JSON, or None when the type
        already guarantees it."""
        raise NotImplementedError

    #: Whether the JSON check accepts only an object or an array (not a bare string,
    #: number, boolean or null), so a scalar payload must be refused before the INSERT.
    json_documents_only: bool = False

    def primary_key(self, table: Table) -> str | None:
        return (f"CONSTRAINT {self.quote(table.name.primary_key)} "
                f"PRIMARY KEY ({self.quote('id')})")

    def table_constraints(self, table: Table) -> list[str]:
        q = self.quote
        constraints = [self.primary_key(table)]
        constraints += [f"CONSTRAINT {q(u.name)} UNIQUE ({self.columns(u.columns)})"
                        for u in table.uniques]
        for column in table.json_columns:
            expression = self.json_check(column)
            if expression is not None:
                constraints.append(
                    f"CONSTRAINT {q(table.name.json_check(column))} CHECK ({expression})"
                )
        quoted = {c.name: q(c.name) for c in table.columns}
        constraints += [f"CONSTRAINT {q(c.name)} CHECK ({c.expression.format_map(quoted)})"
                        for c in table.checks]
        return [c for c in constraints if c is not None]

    def table_body(self, table: Table, indent: str = "") -> str:
        lines = ([self.column_definition(table, c) for c in table.columns]
                 + self.table_constraints(table))
        return "(\n" + ",\n".join(f"{indent}    {line}" for line in lines) + f"\n{indent})"

    def index_definition(self, index: Index, table: Table | None = None) -> str:
        table = table or self.outbox
        keys = index.keys if self.supports_include else index.keys + index.include
        sql = f"{self.quote(index.name)} ON {self.qualified(table)} ({self.columns(keys)})"
        if self.supports_include and index.include:
            sql += f" INCLUDE ({self.columns(index.include)})"
        if index.open_rows_only and self.supports_partial_index:
            sql += f" WHERE {self.quote('status')} IN {OPEN_STATUSES_SQL}"
        elif index.closed_rows_only and self.supports_partial_index:
            sql += f" WHERE {self.quote('status')} IN {CLOSED_STATUSES_SQL}"
        return sql

    def create_statements(self, table: Table | None = None) -> list[str]:
        """The guarded, idempotent DDL that creates whatever part of the table is missing.

        ``IF NOT EXISTS`` serves where the vendor has it for tables and indexes alike.
        """
        table = table or self.outbox
        statements = [f"CREATE TABLE IF NOT EXISTS {self.qualified(table)} "
                      f"{self.table_body(table)}{self.table_options(table)}"]
        for index in table.indexes:
            statements += self.create_index_statements(index, table)
        return statements

    def table_options(self, table: Table) -> str:
        """What follows the column list of ``table``'s CREATE TABLE (storage engine,
        storage parameters), with its leading space; nothing by default."""
        return ""

    def create_index_statements(self, index: Index, table: Table) -> list[str]:
        """Create ``index`` on ``table`` unless an index of that name exists."""
        return [f"CREATE INDEX IF NOT EXISTS {self.index_definition(index, table)}"]

    def drop_index_statements(self, index: Index, table: Table) -> list[str]:
        """Drop ``index`` from ``table`` if it exists."""
        qualified = TableName(index.name, table.name.schema).quoted(self.vendor)
        return [f"DROP INDEX IF EXISTS {qualified}"]

    def indexes(self) -> tuple[Index, ...]:
        """The outbox's indexes as migration 0001 builds them (released DDL: frozen)."""
        return contract_indexes(self.name, partial=self.supports_partial_index)

    def migrated_indexes(self) -> tuple[Index, ...]:
        """The outbox's indexes once every migration has run: 0001's, with 0007's
        closed-rows retention index in place of the unfiltered one where the vendor has
        filtered indexes."""
        built = self.indexes()
        if not self.filtered_retention_index:
            return built
        return (*built[:-1], closed_rows_index(self.name))

    @property
    def retention_index(self) -> Index:
        """The index purge and the archive's closed-row selections walk, once every
        migration has run."""
        return self.migrated_indexes()[-1]

    def closed_rows_index_statements(self, *, forwards: bool = True) -> list[str]:
        """Migration 0007: replace the unfiltered retention index ``(status,
        processed_at)`` with one filtered on the closed statuses (forwards), or the other
        way round, where :attr:`filtered_retention_index` says so; elsewhere nothing
        changes. Each step is guarded; the new index is
        built before the old one goes, so purge always has one to walk."""
        if not self.filtered_retention_index:
            return []
        table = self.outbox
        old, new = self.indexes()[-1], closed_rows_index(self.name)
        build, drop = (new, old) if forwards else (old, new)
        return self.create_index_statements(build, table) + self.drop_index_statements(
            drop, table)

    def open_rows_index_statements(self, *, forwards: bool = True) -> list[str]:
        """Migration 0005: replace the first release's head-of-aggregate index with the
        open-rows index (forwards), or the other way round. Each step is guarded, so
        running it again, or on a table 0001 created with the new index already, only
        does what is missing. The new index is built before the old one goes, so the
        claim always has one to probe."""
        table = self.outbox
        new = table.indexes[0]
        old = first_release_probe_index(self.name, status_keyed=self.status_keyed_probe)
        build, drop = (new, old) if forwards else (old, new)
        return self.create_index_statements(build, table) + self.drop_index_statements(
            drop, table)

    def autovacuum_statements(self, *, forwards: bool = True) -> list[str]:
        """Migration 0006: the outbox's autovacuum tuning on an existing table (forwards)
        or back to the server's defaults. Only PostgreSQL has it; nothing elsewhere."""
        return []

    def drop_statements(self, table: Table | None = None) -> list[str]:
        return [f"DROP TABLE IF EXISTS {self.qualified(table or self.outbox)}"]

    # -- planner statistics (see store/statistics.py) ---------------------------------
    def believed_open_rows_sql(self) -> tuple[str, list[Any]] | None:
        """How many open rows the planner believes the outbox holds, as SQL and its
        parameters (one row, one number; NULL or negative when unknown); None where the
        relay does not look after the statistics."""
        return None

    def refresh_statistics_sql(self) -> str | None:
        """A statement that refreshes the outbox's planner statistics without waiting
        on anyone; None where the relay does not."""
        return None

    def sequential_key_statements(self, table: Table, *, on: bool = True) -> list[str]:
        """Tuning of the primary key for inserts that all land on its last page (SQL
        Server's OPTIMIZE_FOR_SEQUENTIAL_KEY); nothing elsewhere."""
        return []

    # -- DML ---------------------------------------------------------------------------
    # Django's cursors take %s placeholders on every backend (pyodbc's ? and sqlite's ?
    # are substituted by the backend), so a literal % in DML is written %%.

    #: The placeholder for a JSON value; PostgreSQL casts, the others convert implicitly.
    json_placeholder: ClassVar[str] = "%s"

    def now_plus_sql(self) -> str:
        """The database's UTC now plus a bound offset (see :meth:`offset_param`)."""
        raise NotImplementedError

    def offset_param(self, milliseconds: int) -> Any:
        """The bound value for :meth:`now_plus_sql` that means ``milliseconds``."""
        return milliseconds

    def select_column(self, column: str) -> str:
        """How a claimed column is read back (a cast where the driver would decode)."""
        return f"o.{self.quote(column)}"

    def ids_condition(self, ids: Sequence[int]) -> tuple[str, list[Any]]:
        """``id`` restricted to ``ids``, as SQL and its parameters."""
        return f"{self.quote('id')} IN ({', '.join(['%s'] * len(ids))})", list(ids)

    def statement(self, key: Hashable, build: Callable[[], T]) -> T:
        """SQL (text, or a :data:`~.sql.Fragment` whose changing values are slots) that
        depends only on this dialect (and ``key``): built on first use, so the relay's
        every-pass statements cost no string building."""
        if key not in self._statements:
            self._statements[key] = build()
        return self._statements[key]  # type: ignore[no-any-return]

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

    def _claim_columns(self, alias: str) -> tuple[str, str, str]:
        return tuple(f"{alias}.{self.quote(c)}"  # type: ignore[return-value]
                     for c in ("status", "next_retry_at", "claimed_at"))

    def fresh_sql(self, alias: str = "c") -> Fragment:
        """Pending rows never tried: the bulk of every claim. They sit together in the
        claim index, in id order, so a scan for them can stop after the first few."""
        status, retry_at, _ = self._claim_columns(alias)
        return f"{status} = {PENDING} AND {retry_at} IS NULL", []

    def overdue_sql(self, alias: str = "c") -> Fragment:
        """Rows whose retry time has come, and rows whose lease expired (their relay
        died): claimed before :data:`~.sql.LEASE_OFFSET` (a negative offset from now).

        A claimed row's lease runs ``CLAIM_TIMEOUT`` from ``claimed_at`` and, once its
        relay has renewed it (see :meth:`renew`), until ``next_retry_at``: the time
        another relay may retry it if this one falls silent."""
        status, retry_at, claimed_at = self._claim_columns(alias)
        now = self.now_sql
        return compose(
            f"(({status} = {FAILED} AND ({retry_at} IS NULL OR {retry_at} <= {now})) "
            f"OR ({status} = {PENDING} AND {retry_at} <= {now}) "
            f"OR ({status} = {CLAIMED} AND {claimed_at} < {{}} "
            f"AND ({retry_at} IS NULL OR {retry_at} <= {now})))",
            self.now_plus(LEASE_OFFSET),
        )

    def now_plus(self, offset: Any) -> Fragment:
        """The database's UTC now plus ``offset`` (see :meth:`offset_param`)."""
        return self.now_plus_sql(), [offset]

    def head_of_aggregate_sql(self, alias: str = "c") -> Fragment:
        """No earlier row of the same aggregate is open (pending, claimed or failed)."""
        q = self.quote
        return (
            f"NOT EXISTS (SELECT 1 FROM {self.table} e{self.probe_hint} "
            f"WHERE e.{q('aggregate_id')} = {alias}.{q('aggregate_id')} "
            f"AND e.{q('status')} IN {OPEN_STATUSES_SQL} AND e.{q('id')} < {alias}.{q('id')})"
        ), []

    #: The locking clause of a claim's candidate scans (vendors with SKIP LOCKED).
    skip_locked_sql: ClassVar[str] = ""

    #: How the fresh-head scan orders its rows: the claim index's own order, which for
    #: fresh rows (one status, no retry time) is id order, so the scan stops at the limit
    #: instead of sorting every open row.
    fresh_order: ClassVar[tuple[str, ...]] = ("status", "next_retry_at", "id")

    def fresh_candidates_sql(self) -> Fragment:
        """Ids and aggregates of fresh heads, read in :attr:`fresh_order`, at most
        :data:`~.sql.HEADS` of them."""
        q = self.quote
        order = ", ".join(f"c.{q(column)}" for column in self.fresh_order)
        return self.statement("fresh_candidates", lambda: compose(
            f"SELECT c.{q('id')}, c.{q('aggregate_id')} FROM {self.table} AS c "
            f"WHERE {{}} AND {{}} ORDER BY {order} LIMIT {{}}{self.skip_locked_sql}",
            self.fresh_sql("c"), self.head_of_aggregate_sql("c"), param(HEADS),
        ))

    def overdue_candidates_sql(self) -> Fragment:
        """Ids and aggregates of overdue heads (few, found apart), at most
        :data:`~.sql.HEADS` of them."""
        q = self.quote
        return self.statement("overdue_candidates", lambda: compose(
            f"SELECT c.{q('id')}, c.{q('aggregate_id')} FROM {self.table} AS c "
            f"WHERE {{}} AND {{}} ORDER BY c.{q('id')} LIMIT {{}}{self.skip_locked_sql}",
            self.overdue_sql("c"), self.head_of_aggregate_sql("c"), param(HEADS),
        ))

    def claimable_status_sql(self, alias: str = "c") -> Fragment:
        """The row's own state lets it be claimed (whatever precedes it)."""
        return compose("(({}) OR {})", self.fresh_sql(alias), self.overdue_sql(alias))

    def unbroken_sql(self, alias: str, window: str) -> Fragment:
        """1 while every row of ``window`` up to this one is claimable by its own state,
        0 from the first that is not: a chain stops there."""
        return compose(f"MIN(CASE WHEN {{}} THEN 1 ELSE 0 END) OVER ({window})",
                       self.claimable_status_sql(alias))

    def claimable_sql(self, alias: str = "c") -> Fragment:
        """Rows a relay may take now, each the head of its aggregate."""
        return compose("{} AND {}", self.claimable_status_sql(alias),
                       self.head_of_aggregate_sql(alias))

    #: Table hint on the head-of-aggregate probe (SQL Server only).
    probe_hint: ClassVar[str] = ""

    def claim_set_sql(self, alias: str = "o") -> str:
        """SET clause of a claim; an expired lease taken back counts as an attempt."""
        q = self.quote
        prefix = f"{alias}." if self.qualify_set_columns else ""
        return (
            f"{prefix}{q('attempts')} = {alias}.{q('attempts')} "
            f"+ CASE WHEN {alias}.{q('status')} = {CLAIMED} THEN 1 ELSE 0 END, "
            f"{prefix}{q('status')} = {CLAIMED}, {prefix}{q('claimed_at')} = {self.now_sql}"
        )

    #: Whether SET targets may carry the table alias (T-SQL yes, PostgreSQL no).
    qualify_set_columns: ClassVar[bool] = False

    def returned_columns(self) -> str:
        return ", ".join(self.select_column(c) for c in CLAIM_COLUMNS)

    #: Whether the claim is several statements that need the caller's transaction.
    claim_needs_transaction: ClassVar[bool] = False
    #: Whether the claim may run inside a transaction that also settles the last batch.
    claim_joins_transaction: ClassVar[bool] = True
    #: A statement that opens each of the relay's own transactions, tuning them: above
    #: all, letting them commit without waiting for the disk. Losing such a commit in a
    #: database crash only makes rows come back (a claim or ack undone means the event is
    #: published again), never loses an event, so the relay need not pay a durable
    #: commit per batch.
    relay_transaction_sql: ClassVar[str | None] = None

    def claim(self, cursor: Any, limit: int, lease_timeout_ms: int, max_chain: int = 1,
              heads: int | None = None) -> list[tuple[Any, ...]]:
        """Claim up to ``limit`` rows in one short transaction; rows in
        :data:`CLAIM_COLUMNS` order, lowest id first. ``max_chain`` > 1 also hands out,
        behind each of at most ``heads`` heads (default ``limit``), the open rows of its
        aggregate that follow it (see the contract's chains); 1 claims heads only."""
        raise NotImplementedError

    def settle_condition(self, ids: Sequence[int], lease: Any) -> tuple[str, list[Any]]:
        """Rows still held under ``lease``: the fence that stops a relay whose lease was
        taken back from touching rows another relay now holds."""
        condition, params = self.ids_condition(ids)
        q = self.quote
        held = f"{q('status')} = {CLAIMED} AND {q('claimed_at')} = {self.timestamp_placeholder}"
        return f"{condition} AND {held}", [*params, lease]

    def is_transient(self, exc: BaseException) -> bool:
        """Whether ``exc`` (a ``django.db.Error``) means "try the same again": a deadlock
        victim, a serialization failure, a lock wait that timed out."""
        return False

    def execute_often(self, cursor: Any, sql: str, params: Sequence[Any]) -> Any:
        """Run one of the relay's every-pass statements; returns the cursor to read.
        Vendors that can keep such statements prepared override this."""
        cursor.execute(sql, params)
        return cursor

    def ack(self, cursor: Any, ids: Sequence[int], lease: Any) -> int:
        """Mark delivered rows done in one statement; returns how many were still held."""
        condition, params = self.settle_condition(ids, lease)
        q = self.quote
        done = self.execute_often(
            cursor,
            f"UPDATE {self.table} SET {q('status')} = {DONE}, {q('processed_at')} = {self.now_sql} "
            f"WHERE {condition}",
            params,
        )
        return int(done.rowcount)

    def fail(self, cursor: Any, failures: Sequence[tuple[int, int, str]], lease: Any) -> int:
        """``failures`` are (id, retry delay in ms, error): status failed, one more attempt,
        retry time computed by the database clock."""
        q = self.quote
        total = 0
        for row_id, delay_ms, error in failures:
            condition, params = self.settle_condition([row_id], lease)
            cursor.execute(
                f"UPDATE {self.table} SET {q('attempts')} = {q('attempts')} + 1, "
                f"{q('status')} = {FAILED}, {q('next_retry_at')} = {self.now_plus_sql()}, "
                f"{q('last_error')} = %s WHERE {condition}",
                [self.offset_param(delay_ms), error, *params],
            )
            total += cursor.rowcount
        return total

    def bury(self, cursor: Any, burials: Sequence[tuple[int, str, bool]], lease: Any) -> int:
        """``burials`` are (id, error, counts_attempt): status dead, never claimed again."""
        q = self.quote
        total = 0
        for row_id, error, counts_attempt in burials:
            condition, params = self.settle_condition([row_id], lease)
            cursor.execute(
                f"UPDATE {self.table} SET {q('attempts')} = {q('attempts')} + %s, "
                f"{q('status')} = {DEAD}, {q('processed_at')} = {self.now_sql}, "
                f"{q('next_retry_at')} = NULL, {q('last_error')} = %s WHERE {condition}",
                [1 if counts_attempt else 0, error, *params],
            )
            total += cursor.rowcount
        return total

    def renew(self, cursor: Any, ids: Sequence[int], lease: Any, lease_timeout_ms: int) -> int:
        """Extend the lease of the rows still held under ``lease`` to ``lease_timeout_ms``
        from now; returns how many were renewed. The lease token (``claimed_at``) stays
        as it is, so a settlement running at the same time still matches it.

        A row locked by anyone (this relay's own settlement, a DBA's transaction) is
        skipped, never waited for: no other relay can take a locked row back either, and
        a renewal stuck behind one lock would let every other row's lease run out."""
        condition, params = self.settle_condition(ids, lease)
        q = self.quote
        if self.skip_locked_sql:
            cursor.execute(f"SELECT c.{q('id')} FROM {self.table} AS c "
                           f"WHERE {condition}{self.skip_locked_sql}", params)
            unlocked = [row[0] for row in cursor.fetchall()]
            if not unlocked:
                return 0
            condition, params = self.settle_condition(unlocked, lease)
        cursor.execute(
            f"UPDATE {self.table}{self.renew_hint} SET {q('next_retry_at')} = "
            f"{self.now_plus_sql()} WHERE {condition}",
            [self.offset_param(lease_timeout_ms), *params],
        )
        return int(cursor.rowcount)

    #: Table hint of the renewal's UPDATE (SQL Server, which has no SKIP LOCKED).
    renew_hint: ClassVar[str] = ""

    def release(self, cursor: Any, ids: Sequence[int], lease: Any) -> int:
        """Hand rows back untouched (the broker was down): pending again, no attempt spent."""
        condition, params = self.settle_condition(ids, lease)
        q = self.quote
        cursor.execute(
            f"UPDATE {self.table} SET {q('status')} = {PENDING}, {q('claimed_at')} = NULL, "
            f"{q('next_retry_at')} = NULL "
            f"WHERE {condition}",
            params,
        )
        return int(cursor.rowcount)

    #: How a batch delete's id subquery ends: its limit, and a lock where there are row
    #: locks.
    purge_subquery_tail: ClassVar[str] = "LIMIT %s"
    #: The most rows one purge statement deletes, whatever batch size is asked for.
    max_delete_batch: ClassVar[int] = MAX_BATCH

    def delete_batch(
        self, cursor: Any, table: str, condition: str, params: Sequence[Any], limit: int
    ) -> int:
        """Delete up to ``limit`` rows of ``table`` (quoted) that match ``condition`` (SQL
        whose placeholders ``params`` fill); the purges of both tables run on this."""
        q = self.quote
        cursor.execute(
            f"DELETE FROM {table} WHERE {q('id')} IN (SELECT {q('id')} FROM {table} "
            f"WHERE {condition} {self.purge_subquery_tail})",
            [*params, limit],
        )
        return int(cursor.rowcount)

    def purge_batch(
        self, cursor: Any, statuses: Sequence[int], cutoff: Any, limit: int
    ) -> int:
        """Delete up to ``limit`` rows in ``statuses`` processed before ``cutoff``."""
        return self.delete_batch(cursor, self.table, self.purge_condition(statuses), [cutoff],
                                 limit)

    #: The placeholder of a bound time (purge's cutoff, a lease token).
    timestamp_placeholder: ClassVar[str] = "%s"
    #: Whether the timestamp columns carry their zone (PostgreSQL's timestamptz); the
    #: other vendors' hold UTC wall time, with no zone to convert a bound value by.
    zoned_timestamps: ClassVar[bool] = False

    def purge_condition(self, statuses: Sequence[int]) -> str:
        """Closed rows older than the bound cutoff; statuses are ints, never user text."""
        q = self.quote
        codes = ", ".join(str(int(s)) for s in statuses)
        return f"{q('status')} IN ({codes}) AND {q('processed_at')} < {self.timestamp_placeholder}"

    # -- the inbox ---------------------------------------------------------------------
    def record_message(self, cursor: Any, table: Table, consumer: str, message_id: str) -> bool:
        """Insert the inbox row of (``consumer``, ``message_id``) unless it exists; True
        when this call inserted it.

        An uncommitted row of another transaction with the same key makes this wait for
        that transaction: if it commits, nothing is inserted (False); if it rolls back,
        this inserts. So two deliveries of one message never both get True.
        """
        sql = self.statement(("record", table.name), lambda: self.record_message_sql(table))
        cursor.execute(sql, self.record_message_params(consumer, message_id))
        return int(cursor.rowcount) == 1

    def record_message_sql(self, table: Table) -> str:
        """Placeholders: those of :meth:`record_message_params`."""
        key = self.columns(INBOX_KEY)
        return (f"INSERT INTO {self.qualified(table)} ({key}) VALUES (%s, %s) "
                f"ON CONFLICT ({key}) DO NOTHING")

    def record_message_params(self, consumer: str, message_id: str) -> list[Any]:
        return [consumer, message_id]

    def inbox_purge_batch(
        self, cursor: Any, table: Table, cutoff: Any, consumer: str | None, limit: int
    ) -> int:
        """Delete up to ``limit`` inbox rows handled before ``cutoff`` (of ``consumer``
        only, unless None)."""
        q = self.quote
        condition = f"{q('handled_at')} < {self.timestamp_placeholder}"
        params = [cutoff]
        if consumer is not None:
            condition += f" AND {q('consumer')} = %s"
            params.append(consumer)
        return self.delete_batch(cursor, self.qualified(table), condition, params, limit)
