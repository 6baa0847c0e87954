"""What every vendor's SQL has in common: the tables' shapes and the dialect interface.

Each table (the outbox, the consumers' inbox) is described once here as a :class:`Table`:
columns, constraints and indexes. Every dialect renders any table with the same code;
each vendor module says how its dialect spells them (types, quoting, guards) and holds
all of its own SQL.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
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
from .sql import HEADS, LEASE_OFFSET, PART, PARTS, Fragment, Partition, compose, param
from .tables import (
    CLAIM_COLUMNS,
    INBOX_KEY,
    INSERT_COLUMNS,
    JSON_COLUMNS,
    OPEN_STATUSES_SQL,
    Table,
)

if TYPE_CHECKING:
    from .closed_rows import ClosedRowsSql
    from .schema import SchemaSql

T = TypeVar("T")


class Dialect:
    """All SQL of one vendor: the DDL of any :class:`Table`, the outbox's operations
    (for the outbox named at construction) and the inbox's.

    Subclasses set the class attributes and override the hooks whose spelling differs;
    rendering the shared shape happens here once. The history pipeline's SQL is a part
    of its own, :attr:`closed_rows` (a ``closed_rows_class``).
    """

    vendor: ClassVar[str]
    schema_class: ClassVar[type[SchemaSql]]
    closed_rows_class: ClassVar[type[ClosedRowsSql]]
    #: The database's current UTC time, evaluated once per statement.
    now_sql: ClassVar[str]

    def __init__(self, name: TableName, *, native_json: bool = False) -> None:
        self.name = name.for_vendor(self.vendor)
        self.native_json = native_json
        self.table = self.name.quoted(self.vendor)
        self._statements: dict[Hashable, Any] = {}
        #: The DDL of this outbox and of the inbox.
        self.schema = self.schema_class(self)
        #: The history pipeline's SQL over this outbox.
        self.closed_rows = self.closed_rows_class(self)

    # -- identifiers and literals ------------------------------------------------------
    def quote(self, identifier: str) -> str:
        opening, closing = QUOTES[self.vendor]
        return f"{opening}{identifier}{closing}"

    def columns(self, names: Sequence[str]) -> str:
        return ", ".join(self.quote(n) for n in names)

    #: Whether the JSON check accepts only an object or an array (not a bare string,
    #: number, boolean or null), so a scalar payload must be refused before the INSERT.
    json_documents_only: bool = False

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

    def fresh_candidates_sql(self, partitioned: bool = False) -> Fragment:
        """Ids and aggregates of fresh heads, read in :attr:`fresh_order`, at most
        :data:`~.sql.HEADS` of them; ``partitioned``: of this relay's part only (see
        :meth:`partition_sql`)."""
        q = self.quote
        order = ", ".join(f"c.{q(column)}" for column in self.fresh_order)
        return self.statement(("fresh_candidates", partitioned), lambda: compose(
            f"SELECT c.{q('id')}, c.{q('aggregate_id')} FROM {self.table} AS c "
            f"WHERE {{}} AND {{}} ORDER BY {order} LIMIT {{}}{self.skip_locked_sql}",
            self.fresh_in_part_sql("c", partitioned), self.head_of_aggregate_sql("c"),
            param(HEADS),
        ))

    def fresh_in_part_sql(self, alias: str, partitioned: bool) -> Fragment:
        """:meth:`fresh_sql`, and with ``partitioned`` in this relay's part."""
        if not partitioned:
            return self.fresh_sql(alias)
        return compose("{} AND {}", self.fresh_sql(alias), self.partition_sql(alias))

    #: Whether the vendor can hash an aggregate id in SQL, so that several relays can
    #: share the fresh heads by part (:meth:`partition_sql`).
    partitions_aggregates: ClassVar[bool] = True

    def aggregate_hash_sql(self, alias: str) -> str:
        """A non-negative integer hash of the row's ``aggregate_id``, the same for every
        session of the database."""
        raise NotImplementedError

    def partition_sql(self, alias: str = "c") -> Fragment:
        """The row's aggregate falls in this relay's part: its hash modulo
        :data:`~.sql.PARTS` is :data:`~.sql.PART`. Only fresh heads are cut this way;
        retries and expired leases are anyone's (see docs/relay.md, "Several relays")."""
        return compose(f"MOD({self.aggregate_hash_sql(alias)}, {{}}) = {{}}",
                       param(PARTS), param(PART))

    def overdue_candidates_sql(self) -> Fragment:
        """Ids and aggregates of overdue heads (few, found apart), at most
        :data:`~.sql.HEADS` of them."""
        q = self.quote
        return self.statement("overdue_candidates", lambda: compose(
            f"SELECT c.{q('id')}, c.{q('aggregate_id')} FROM {self.table} AS c "
            f"WHERE {{}} AND {{}} ORDER BY c.{q('id')} LIMIT {{}}{self.skip_locked_sql}",
            self.overdue_sql("c"), self.head_of_aggregate_sql("c"), param(HEADS),
        ))

    def claimable_status_sql(self, alias: str = "c", partitioned: bool = False) -> Fragment:
        """The row's own state lets it be claimed (whatever precedes it); ``partitioned``:
        a fresh row only in this relay's part (:meth:`partition_sql`)."""
        return compose("(({}) OR {})", self.fresh_in_part_sql(alias, partitioned),
                       self.overdue_sql(alias))

    def unbroken_sql(self, alias: str, window: str) -> Fragment:
        """1 while every row of ``window`` up to this one is claimable by its own state,
        0 from the first that is not: a chain stops there."""
        return compose(f"MIN(CASE WHEN {{}} THEN 1 ELSE 0 END) OVER ({window})",
                       self.claimable_status_sql(alias))

    def claimable_sql(self, alias: str = "c", partitioned: bool = False) -> Fragment:
        """Rows a relay may take now, each the head of its aggregate."""
        return compose("{} AND {}", self.claimable_status_sql(alias, partitioned),
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
              heads: int | None = None, partition: Partition | None = None
              ) -> list[tuple[Any, ...]]:
        """Claim up to ``limit`` rows in one short transaction; rows in
        :data:`CLAIM_COLUMNS` order, lowest id first. ``max_chain`` > 1 also hands out,
        behind each of at most ``heads`` heads (default ``limit``), the open rows of its
        aggregate that follow it (see the contract's chains); 1 claims heads only.
        ``partition``: fresh heads of that part of the aggregates only (vendors where
        :attr:`partitions_aggregates`)."""
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
        return (f"INSERT INTO {self.schema.qualified(table)} ({key}) VALUES (%s, %s) "
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
        return self.delete_batch(cursor, self.schema.qualified(table), condition, params, limit)
