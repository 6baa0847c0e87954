"""The contract's tables, described once: their columns, constraints and indexes, and
the outbox's index set. Every vendor's dialect renders these shapes into
its own DDL (see :class:`~.base.Dialect`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..contract import CLAIMED, CLOSED, OPEN, StatusCode, sql_list
from ..naming import MAX_IDENTIFIER_LENGTH, TableName


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # a key of the dialect's COLUMN_TYPES
    nullable: bool = False
    default: str | None = None  # a key of the dialect's DEFAULTS
    #: Given by the event's producer; ``publish_event()`` writes these and the bucket it
    #: derives, and the other columns take their database defaults.
    inserted: bool = False


#: The payload's schema version (nullable: events published without a version have
#: none).
SCHEMA_VERSION = Column("schema_version", "text255", nullable=True)

#: The aggregate's bucket (:func:`~eventferry_django.contract.bucket_of`), written by
#: ``publish_event()``: relays share the aggregates out by bucket, each claiming fresh
#: rows of its own buckets through :func:`bucket_index`. Nullable: rows written by a
#: writer that leaves it out have none, and every relay claims those.
BUCKET = Column("bucket", "tinyint", nullable=True)

#: The contract's table, in order. ``kind`` and ``default`` are logical names that each
#: dialect maps to its own types and expressions. The last two columns come last because
#: the development builds before 0.1.0 added them to existing tables: a database they
#: built has the same columns in the same order.
COLUMNS: tuple[Column, ...] = (
    Column("id", "id"),
    Column("message_id", "text64", inserted=True),
    Column("topic", "text255", inserted=True),
    Column("aggregate_type", "text255", inserted=True),
    Column("aggregate_id", "text255", inserted=True),
    Column("partition_key", "text255", nullable=True, inserted=True),
    Column("payload", "json", inserted=True),
    Column("headers", "json", default="empty_json", inserted=True),
    Column("trace_id", "text255", nullable=True, inserted=True),
    Column("status", "tinyint", default="zero"),
    Column("attempts", "int", default="zero"),
    Column("claimed_at", "timestamp", nullable=True),
    Column("next_retry_at", "timestamp", nullable=True),
    Column("created_at", "timestamp", default="now"),
    Column("processed_at", "timestamp", nullable=True),
    Column("last_error", "text4000", nullable=True),
    SCHEMA_VERSION,
    BUCKET,
)

JSON_COLUMNS = tuple(c.name for c in COLUMNS if c.kind == "json")

#: The consumers' inbox: one row per (consumer, message id) handled. The clustered key is
#: an ascending id, not the random message ids, so inserts append instead of splitting
#: pages; the unique key is what turns a redelivered message into "handled already".
INBOX_COLUMNS: tuple[Column, ...] = (
    Column("id", "id"),
    Column("consumer", "text255"),
    Column("message_id", "text64"),
    Column("handled_at", "timestamp", default="now"),
)

#: The inbox's unique key, in the order its index is built and probed.
INBOX_KEY: tuple[str, ...] = ("consumer", "message_id")

#: The relay registry: one row per running relay of an outbox, stamped by the database's
#: clock each time the relay checks in. ``instance`` is drawn at random when the relay
#: starts, so two relays given the same ``--relay-id`` still count as two.
REGISTRY_COLUMNS: tuple[Column, ...] = (
    Column("id", "id"),
    Column("instance", "text64"),
    Column("relay_id", "text255"),
    Column("seen_at", "timestamp", default="now"),
)

#: The bucket leases: one row per bucket (:data:`~eventferry_django.contract.BUCKETS`),
#: saying which relay instance holds it (``owner``), until when by the database's clock
#: (``expires_at``), and under which ``epoch``: raised each time the bucket is taken, so
#: a relay that lost a bucket cannot settle rows of it even after taking it back.
BUCKET_LEASE_COLUMNS: tuple[Column, ...] = (
    Column("id", "id"),
    Column("bucket", "tinyint"),
    Column("owner", "text64", nullable=True),
    Column("epoch", "int", default="zero"),
    Column("expires_at", "timestamp", nullable=True),
)

#: The batches in flight (the one-write design's journal): one row per batch a relay has
#: claimed and not settled, written with the claim and deleted by the settlement.
#: ``relay`` is the relay instance (as the bucket leases name it) and ``batch`` its own
#: number for the batch; ``events`` the batch's rows by bucket, with the epoch each
#: bucket was claimed under (:mod:`~eventferry_django.store.in_flight_journal`).
#: ``taken`` counts the rows other relays took over from the batch since; while it is 0
#: the batch is whole, and its settlement needs to read nothing back.
IN_FLIGHT_COLUMNS: tuple[Column, ...] = (
    Column("id", "id"),
    Column("relay", "text64"),
    Column("batch", "int"),
    Column("claimed_at", "timestamp", default="now"),
    Column("event_count", "int"),
    Column("taken", "int", default="zero"),
    Column("events", "text"),
)

#: The results of Django tasks enqueued through the outbox
#: (:class:`~eventferry_django.task_backend.OutboxTaskBackend`): one row per task, written
#: with its outbox row and updated by the worker that runs it. ``result_id`` is the
#: task's result id and its outbox row's message id. The JSON columns hold documents only
#: (SQL Server's ISJSON check refuses bare scalars): ``return_value`` is
#: ``{"value": ...}``.
TASK_RESULT_COLUMNS: tuple[Column, ...] = (
    Column("id", "id"),
    Column("result_id", "text64"),
    Column("task_path", "text255"),
    Column("backend", "text255"),
    Column("queue_name", "text255"),
    Column("priority", "int", default="zero"),
    Column("status", "text64"),
    Column("arguments", "json"),
    Column("run_after", "timestamp", nullable=True),
    Column("enqueued_at", "timestamp", default="now"),
    Column("started_at", "timestamp", nullable=True),
    Column("last_attempted_at", "timestamp", nullable=True),
    Column("finished_at", "timestamp", nullable=True),
    Column("attempts", "int", default="zero"),
    Column("worker_ids", "json", nullable=True),
    Column("return_value", "json", nullable=True),
    Column("errors", "json", nullable=True),
)

#: An event's own columns, as its producer gave them: what a claim hands out of them.
EVENT_COLUMNS: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.inserted)

#: Columns publish_event() writes, in the table's order; the rest take their defaults.
INSERT_COLUMNS: tuple[str, ...] = (*EVENT_COLUMNS, BUCKET.name)

#: What publish_event() writes for events given a schema version (rows without one
#: leave the column to its NULL default).
VERSIONED_INSERT_COLUMNS: tuple[str, ...] = (*INSERT_COLUMNS, SCHEMA_VERSION.name)

#: Columns a claim returns, in this order: what the outbound message carries
#: (``created_at`` is CloudEvents' ``time``, ``schema_version`` the payload's version).
CLAIM_COLUMNS: tuple[str, ...] = ("id", *EVENT_COLUMNS, "attempts", "created_at",
                                  SCHEMA_VERSION.name)


#: The open statuses (pending, claimed, failed: they hold back later events of the same
#: aggregate) as SQL, because they appear in index predicates.
OPEN_STATUSES_SQL = sql_list(OPEN)
#: The closed statuses (done, dead: what purge and the archive read) as SQL.
CLOSED_STATUSES_SQL = sql_list(CLOSED)


@dataclass(frozen=True)
class Index:
    name: str
    keys: tuple[str, ...]
    include: tuple[str, ...] = ()
    open_rows_only: bool = False
    #: Filtered on the closed statuses (done, dead), where the vendor has filtered
    #: indexes; exclusive with ``open_rows_only``.
    closed_rows_only: bool = False
    #: Filtered on fresh rows (pending, never tried nor scheduled), where the vendor has
    #: filtered indexes; exclusive with the other two.
    fresh_rows_only: bool = False


@dataclass(frozen=True)
class Unique:
    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Check:
    """A CHECK constraint; ``expression`` writes each column as ``{column}``, which the
    dialect replaces with the quoted name. JSON checks are not listed: they follow from
    the ``json`` columns, as the vendor spells them (or leaves them to the type)."""

    name: str
    expression: str


@dataclass(frozen=True)
class Table:
    """One table's shape, rendered into guarded, idempotent DDL by any dialect.

    The primary key is always ``id``; its name and every other object name embed the
    table name, so a DBA can tell which table an index serves.
    """

    name: TableName
    columns: tuple[Column, ...]
    uniques: tuple[Unique, ...] = ()
    checks: tuple[Check, ...] = ()
    indexes: tuple[Index, ...] = ()

    @property
    def json_columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.kind == "json")

    def object_names(self) -> tuple[str, ...]:
        """The table's name and every name derived from it."""
        return (
            self.name.table,
            self.name.primary_key,
            *(u.name for u in self.uniques),
            *(self.name.json_check(c) for c in self.json_columns),
            *(c.name for c in self.checks),
            *(self.name.default_constraint(c.name) for c in self.columns if c.default),
            *(i.name for i in self.indexes),
        )

    def too_long_for(self, vendor: str) -> list[str]:
        """Names the vendor would truncate (PostgreSQL silently does, so two index names
        could collide)."""
        limit = MAX_IDENTIFIER_LENGTH.get(vendor)
        if limit is None:
            return []
        return [name for name in self.object_names() if len(name) > limit]


def contract_indexes(name: TableName, *, partial: bool = True) -> tuple[Index, ...]:
    """The claim's two indexes. Without ``partial`` (filtered) indexes, ``status``
    becomes the open-rows index's second key column, so its probes seek straight to the
    open statuses instead of walking an aggregate's closed history."""
    open_rows = (
        Index(name.aggregate_index, ("aggregate_id", "id"), open_rows_only=True)
        if partial
        else Index(name.aggregate_index, ("aggregate_id", "status", "id"))
    )
    return (
        # The head-of-aggregate probe ("is there an earlier open row of this aggregate?")
        # and the chain walk ("the open rows after the head, in id order").
        open_rows,
        # The claim scan, over open rows only, so retained done rows cost it nothing.
        Index(
            name.claim_index,
            ("status", "next_retry_at", "id"),
            include=("aggregate_id", "claimed_at"),
            open_rows_only=True,
        ),
    )


def retention_index(name: TableName, *, closed_rows_only: bool) -> Index:
    """The index purge and the archive walk: closed rows by status and processing time.

    Filtered on the closed statuses where the vendor filters indexes well, so the
    claim's open-status predicates can never be planned on it, however stale the
    statistics (issue 22: the unfiltered index served the claim's scans and probes after
    a restart left the statistics stale, 6-13 s a claim). Unfiltered elsewhere."""
    if closed_rows_only:
        return Index(name.closed_index, ("status", "processed_at"), closed_rows_only=True)
    return Index(name.retention_index, ("status", "processed_at"))


def bucket_index(name: TableName, *, partial: bool = True) -> Index:
    """Each bucket's fresh rows in id order, with their
    aggregates. A relay's claim reads the first few of each bucket it owns, so it reads
    only rows it may take, however deep the backlog behind them. Without filtered
    indexes (MariaDB/MySQL), ``status`` follows the bucket in the key, so the seek lands
    on the pending rows, and the included columns become trailing key columns."""
    if partial:
        return Index(name.bucket_index, ("bucket", "id"), include=("aggregate_id",),
                     fresh_rows_only=True)
    return Index(name.bucket_index, ("bucket", "status", "id"),
                 include=("next_retry_at", "aggregate_id"))


def outbox_table(name: TableName, indexes: tuple[Index, ...]) -> Table:
    """The contract's outbox table named ``name``, with the dialect's ``indexes``."""
    return Table(
        name,
        COLUMNS,
        uniques=(Unique(name.message_id_unique, ("message_id",)),),
        checks=(
            Check(name.status_check, f"{{status}} IN {sql_list(StatusCode)}"),
            Check(name.claimed_check, f"{{status}} <> {CLAIMED} OR {{claimed_at}} IS NOT NULL"),
        ),
        indexes=indexes,
    )


def inbox_table(name: TableName) -> Table:
    """The consumers' inbox named ``name``."""
    return Table(
        name,
        INBOX_COLUMNS,
        uniques=(Unique(f"UQ_{name.table}_consumer_message_id", INBOX_KEY),),
        # The retention scan of ``outbox_purge --inbox``.
        indexes=(Index(f"IX_{name.table}_handled_at", ("handled_at",)),),
    )


def registry_table(name: TableName) -> Table:
    """The relay registry named ``name`` (a few rows: no index beyond its keys)."""
    return Table(name, REGISTRY_COLUMNS,
                 uniques=(Unique(f"UQ_{name.table}_instance", ("instance",)),))


def bucket_leases_table(name: TableName) -> Table:
    """The bucket leases named ``name``: 256 rows, found by bucket through its unique
    key (no other index: every statement names its buckets or its owner's few)."""
    return Table(name, BUCKET_LEASE_COLUMNS,
                 uniques=(Unique(f"UQ_{name.table}_bucket", ("bucket",)),))


def in_flight_table(name: TableName) -> Table:
    """The batches in flight named ``name``: a few rows per relay, found by relay and
    batch through its unique key."""
    return Table(name, IN_FLIGHT_COLUMNS,
                 uniques=(Unique(f"UQ_{name.table}_batch", ("relay", "batch")),))


def task_results_table(name: TableName) -> Table:
    """The Django tasks' results named ``name``: the unique result id
    that ``get_result()`` and the runner look rows up by, and the retention scan's
    index."""
    return Table(
        name,
        TASK_RESULT_COLUMNS,
        uniques=(Unique(f"UQ_{name.table}_result_id", ("result_id",)),),
        indexes=(Index(f"IX_{name.table}_status_finished_at", ("status", "finished_at")),),
    )
