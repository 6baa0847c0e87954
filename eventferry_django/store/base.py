"""What every vendor's relay SQL has in common: the dialect, which holds the claim and
the spelling hooks of the vendor, and composes the vendor's other parts.

A dialect is several small objects, as a Django backend is: ``features`` (flags only),
``schema`` (the DDL of any table of the contract), ``inserts`` (``publish_event()``'s
INSERT), ``settlement`` (ack, fail, bury, renew, release), ``purge`` (batch deletes),
``inbox`` (the consumers' inbox) and ``closed_rows`` (the history pipeline's SQL). Each
vendor module subclasses the parts whose spelling differs and names them in its
dialect's ``*_class`` attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..contract import CLAIMED, FAILED, PENDING
from ..naming import QUOTES, TableName
from .claimable import ClaimableSql
from .features import Features
from .inbox_sql import InboxSql
from .inserts import InsertSql
from .purge import PurgeSql
from .settlement_sql import SettlementSql
from .sql import HEADS, LEASE_OFFSET, PART, PARTS, Fragment, Partition, compose, param
from .statistics_sql import StatisticsSql
from .tables import CLAIM_COLUMNS, OPEN_STATUSES_SQL

if TYPE_CHECKING:
    from .closed_rows import ClosedRowsSql
    from .schema import SchemaSql

T = TypeVar("T")


class Dialect:
    """One vendor's SQL for the outbox named at construction: the claim and the hooks
    that spell the vendor's SQL here, every other concern in a part composed at
    construction.

    Subclasses set the class attributes, override the relay hooks whose spelling differs
    and name their parts; rendering the shared shape happens here and in the parts' base
    classes once.
    """

    vendor: ClassVar[str]
    schema_class: ClassVar[type[SchemaSql]]
    closed_rows_class: ClassVar[type[ClosedRowsSql]]
    features_class: ClassVar[type[Features]] = Features
    inserts_class: ClassVar[type[InsertSql]] = InsertSql
    settlement_class: ClassVar[type[SettlementSql]] = SettlementSql
    purge_class: ClassVar[type[PurgeSql]] = PurgeSql
    inbox_class: ClassVar[type[InboxSql]] = InboxSql
    statistics_class: ClassVar[type[StatisticsSql]] = StatisticsSql
    #: The database's current UTC time, evaluated once per statement.
    now_sql: ClassVar[str]
    #: The placeholder of a bound time (a lease token, purge's cutoff).
    timestamp_placeholder: ClassVar[str] = "%s"

    def __init__(self, name: TableName, *, native_json: bool = False) -> None:
        self.name = name.for_vendor(self.vendor)
        self.native_json = native_json
        self.table = self.name.quoted(self.vendor)
        self._statements: dict[Hashable, Any] = {}
        #: What this vendor does differently, as flags.
        self.features = self.features_class(self)
        #: The DDL of this outbox and of the inbox.
        self.schema = self.schema_class(self)
        #: ``publish_event()``'s SQL: the INSERT of new events.
        self.inserts = self.inserts_class(self)
        #: The settlement of claimed rows.
        self.settlement = self.settlement_class(self)
        #: Batch deletes of old rows, of this outbox and of the inbox.
        self.purge = self.purge_class(self)
        #: The consumers' inbox's SQL.
        self.inbox = self.inbox_class(self)
        #: The relay's care of the planner statistics (see store/statistics.py).
        self.statistics = self.statistics_class(self)
        #: The history pipeline's SQL over this outbox.
        self.closed_rows = self.closed_rows_class(self)
        #: The probes for the oldest row a relay could claim now (the status's gauge).
        self.claimable = ClaimableSql(self)

    # -- identifiers and literals ------------------------------------------------------
    def quote(self, identifier: str) -> str:
        opening, closing = QUOTES[self.vendor]
        return f"{opening}{identifier}{closing}"

    def columns(self, names: Sequence[str]) -> str:
        return ", ".join(self.quote(n) for n in names)

    #: How a query asks for its first row only: before the columns, after ORDER BY.
    first_row: ClassVar[tuple[str, str]] = ("", " LIMIT 1")

    # -- DML ---------------------------------------------------------------------------
    # Django's cursors take %s placeholders on every backend (pyodbc's ? and sqlite's ?
    # are substituted by the backend), so a literal % in DML is written %%.

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

    def _claim_columns(self, alias: str) -> tuple[str, str, str]:
        return tuple(f"{alias}.{self.quote(c)}"  # type: ignore[return-value]
                     for c in ("status", "next_retry_at", "claimed_at"))

    def fresh_sql(self, alias: str = "c") -> Fragment:
        """Pending rows never tried: the bulk of every claim. They sit together in the
        claim index, in id order, so a scan for them can stop after the first few."""
        status, retry_at, _ = self._claim_columns(alias)
        return f"{status} = {PENDING} AND {retry_at} IS NULL", []

    def overdue_sql(self, alias: str = "c", expired_leases: bool = True) -> Fragment:
        """Rows whose retry time has come, and (with ``expired_leases``) rows whose lease
        expired (their relay died): claimed before :data:`~.sql.LEASE_OFFSET` (a
        negative offset from now).

        A claimed row's lease runs ``CLAIM_TIMEOUT`` from ``claimed_at`` and, once its
        relay has renewed it (see :meth:`.SettlementSql.renew`), until ``next_retry_at``: the time
        another relay may retry it if this one falls silent."""
        status, retry_at, claimed_at = self._claim_columns(alias)
        now = self.now_sql
        due = (f"({status} = {FAILED} AND ({retry_at} IS NULL OR {retry_at} <= {now})) "
               f"OR ({status} = {PENDING} AND {retry_at} <= {now})")
        if not expired_leases:
            return f"({due})", []
        return compose(
            f"({due} OR ({status} = {CLAIMED} AND {claimed_at} < {{}} "
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

    def overdue_candidates_sql(self, expired_leases: bool = True) -> Fragment:
        """Ids and aggregates of overdue heads (few, found apart), at most :data:`~.sql.HEADS`
        of them; without ``expired_leases``, due retries only (why: :mod:`.relay.planner`)."""
        q = self.quote
        return self.statement(("overdue_candidates", expired_leases), lambda: compose(
            f"SELECT c.{q('id')}, c.{q('aggregate_id')} FROM {self.table} AS c "
            f"WHERE {{}} AND {{}} ORDER BY c.{q('id')} LIMIT {{}}{self.skip_locked_sql}",
            self.overdue_sql("c", expired_leases), self.head_of_aggregate_sql("c"), param(HEADS),
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

    #: A statement that opens each of the relay's own transactions, tuning them: above
    #: all, letting them commit without waiting for the disk. Losing such a commit in a
    #: database crash only makes rows come back (a claim or ack undone means the event is
    #: published again), never loses an event, so the relay need not pay a durable
    #: commit per batch.
    relay_transaction_sql: ClassVar[str | None] = None

    def claim(self, cursor: Any, limit: int, lease_timeout_ms: int, max_chain: int = 1,
              heads: int | None = None, partition: Partition | None = None,
              expired_leases: bool = True) -> list[tuple[Any, ...]]:
        """Claim up to ``limit`` rows in one short transaction; rows in
        :data:`CLAIM_COLUMNS` order, lowest id first. ``max_chain`` > 1 also hands out,
        behind each of at most ``heads`` heads (default ``limit``), the open rows of its
        aggregate that follow it (see the contract's chains); 1 claims heads only.
        ``partition``: fresh heads of that part of the aggregates only (vendors where
        :attr:`partitions_aggregates`). Without ``expired_leases``, a vendor that scans
        for overdue heads apart (:meth:`overdue_candidates_sql`) skips rows whose lease
        expired; one that tests every candidate row it reads anyway may ignore it."""
        raise NotImplementedError

    def is_transient(self, exc: BaseException) -> bool:
        """Whether ``exc`` (a ``django.db.Error``) means "try the same again": a deadlock
        victim, a serialization failure, a lock wait that timed out."""
        return False

    def execute_often(self, cursor: Any, sql: str, params: Sequence[Any]) -> Any:
        """Run one of the relay's every-pass statements; returns the cursor to read.
        Vendors that can keep such statements prepared override this."""
        cursor.execute(sql, params)
        return cursor
