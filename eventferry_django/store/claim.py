"""The claim: a read that hands a relay up to ``rows`` claimable rows of the buckets it
holds, each the head of its aggregate or chained behind one (see the store contract), and
writes nothing (docs/design/one-write.md). A relay claims only from buckets it holds a
lease on, which no other relay reads, so no row is locked to keep two relays apart and
nothing is read twice to check it. The caller runs the claim in its own transaction and
says which aggregates it has in flight, whose rows are still pending and are passed
over. A part of the vendor's dialect (``dialect.claim``) that takes a
:class:`ClaimRequest` whole; each vendor module subclasses :class:`ClaimSql` with the
statements it sends, and what each vendor sends is committed, readable, in
``store/claims/<vendor>.sql``, which ``tests/test_claim_sql.py`` keeps equal to the code.

**Fresh rows.** Pending rows never tried are the bulk of every backlog, and a claim reads
a bounded window of them, never the whole backlog, however deep it is:

- *oldest first* (a relay that holds every bucket): the first :attr:`ClaimRequest.window`
  fresh rows in id order, rows without a bucket among them, read from the claim index,
  the heads among them taken oldest first;
- *bucket by bucket* (a relay holding some of the buckets, see
  :mod:`~eventferry_django.relay.membership`): each row carries its aggregate's bucket
  and of each bucket asked for the claim reads its first
  :attr:`ClaimRequest.window` fresh rows from the bucket index, probes the first row of
  each aggregate among them as a head, and keeps the oldest heads. So a relay reads
  rows of its own buckets only, and only the front of each. Rows with no bucket (written
  by a writer that leaves it out) are left to the bucket filler
  (:mod:`~.bucket_fill`), which gives them theirs.

The rows of the relay's batches in flight are still pending, at the front of the
windows: the windows are wider by the request's :attr:`ClaimRequest.passing` rows (spread
evenly over the buckets, bucket by bucket), and the aggregates in flight are passed over
after the read, so a bucket whose every aggregate is in flight costs a claim its window,
not its whole backlog. An aggregate in flight, or
whose front rows wait behind a row not yet claimable (a retry waiting for its time), is
passed over until that row is settled or due: its rows are then the oldest of their
window, and come first. Read oldest first, a few busy aggregates whose backlog fills the
whole window hold the younger rows of the others back until that backlog is done, as a
queue does; bucket by bucket, only those of their own bucket.

**Overdue rows.** Due retries and scheduled rows whose time has come are few, found apart
in the claim index: of the request's buckets only, bucket by bucket, and of every bucket
(rows without one included) oldest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from ..contract import BUCKETS, CLAIMED, FAILED, MAX_BATCH, PENDING
from ..exceptions import EventferryError
from .ops import SqlOps
from .sql import WINDOW, Fragment, compose, param
from .tables import CLAIM_COLUMNS, OPEN_STATUSES_SQL

#: What a window reads of each row.
WINDOW_COLUMNS = ("id", "aggregate_id")

#: Every bucket, in order.
ALL_BUCKETS: tuple[int, ...] = tuple(range(BUCKETS))

#: How many fresh rows a claim reads for each head it may hand out (spread evenly over
#: the buckets it reads, bucket by bucket). Two: an aggregate held back costs the window
#: its rows, and its front rows are no heads.
WINDOW_SPREAD = 2


@dataclass(frozen=True)
class ClaimRequest:
    """What one claim asks for: up to ``rows`` rows (1..10,000) of at most ``heads``
    aggregates, each head with up to ``max_chain`` - 1 open rows of its aggregate behind
    it. Fresh rows are read oldest first, or with ``buckets`` bucket by bucket from
    those buckets only, overdue rows of those buckets only; ``passing`` is how many rows
    the relay has in flight, which the claim passes over (see the module's docstring)."""

    rows: int
    heads: int | None = None
    max_chain: int = 1
    buckets: tuple[int, ...] | None = None
    passing: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.rows <= MAX_BATCH:
            raise EventferryError(f"claim limit must be 1..{MAX_BATCH:,}, got {self.rows!r}.")
        if self.buckets is not None and (
                not self.buckets or not set(self.buckets) <= set(ALL_BUCKETS)):
            raise EventferryError(f"a claim reads one or more buckets of 0..{BUCKETS - 1}, "
                                  f"got {self.buckets!r}.")
        if self.passing < 0:
            raise EventferryError(f"a claim passes over 0 or more rows, got {self.passing!r}.")

    @property
    def most_heads(self) -> int:
        """The aggregates the claim may take: ``heads``, never more than its rows."""
        return min(self.rows, self.heads or self.rows)

    @property
    def window(self) -> int:
        """The fresh rows read: of each bucket, or in all (see the module's
        docstring)."""
        reads = WINDOW_SPREAD * self.most_heads + self.passing
        return reads if self.buckets is None else max(1, -(-reads // len(self.buckets)))


class ClaimSql:
    """The claim on one vendor: :meth:`run` takes a request whole and returns the rows
    it hands out in :data:`~.tables.CLAIM_COLUMNS` order, lowest id first. This base
    holds the predicates every vendor's statements share; its slots (:mod:`.sql`) are
    filled from the request by :meth:`slots`, the same for every vendor."""

    #: Table hint on the head-of-aggregate probe (SQL Server only).
    probe_hint: ClassVar[str] = ""

    def __init__(self, ops: SqlOps) -> None:
        self.ops = ops

    def run(self, cursor: Any, request: ClaimRequest, in_flight: Sequence[str] = ()
            ) -> list[tuple[Any, ...]]:
        """The rows ``request`` asks for, read and handed out with nothing written,
        passing over the aggregates ``in_flight``. In the caller's transaction; lowest
        id first."""
        raise NotImplementedError

    def statements(self) -> dict[str, Fragment]:
        """The statements :meth:`run` sends, by name, as committed in
        ``store/claims/<vendor>.sql`` (a statement built per request shows its shape for
        one bucket or head, as its docstring says)."""
        raise NotImplementedError

    def slots(self, request: ClaimRequest, in_flight: Sequence[str] = ()) -> dict[str, Any]:
        """The value of every slot of the claim's statements for ``request``, the
        aggregates ``in_flight`` passed over."""
        return {"limit": request.rows, "heads": request.most_heads,
                "max_chain": request.max_chain, "window": request.window,
                "buckets": self.buckets_param(request.buckets or ()),
                "in_flight": self.in_flight_param(in_flight)}

    def buckets_param(self, buckets: Sequence[int]) -> Any:
        """``buckets`` as the :data:`~.sql.BUCKETS` slot binds them."""
        return list(buckets)

    def in_flight_param(self, aggregates: Sequence[str]) -> Any:
        """``aggregates`` as the :data:`~.sql.IN_FLIGHT` slot binds them."""
        return list(aggregates)

    def oldest_sql(self, alias: str = "f", count: Fragment | None = None, *,
                   columns: Sequence[str] = WINDOW_COLUMNS) -> Fragment:
        """The first :data:`~.sql.WINDOW` (or ``count``) fresh rows in id order, their
        ``columns``, read from the claim index (in its own order, which for fresh rows is
        id order): the window of a claim read oldest first."""
        q = self.ops.quote
        order = ", ".join(f"{alias}.{q(c)}" for c in self.oldest_order)
        return compose(
            f"SELECT {', '.join(f'{alias}.{q(c)}' for c in columns)} FROM {self.ops.table} "
            f"AS {alias} WHERE {{}} ORDER BY {order} LIMIT {{}}",
            self.fresh_sql(alias), count or param(WINDOW))

    #: The order a claim read oldest first reads its window in: the claim index's own,
    #: which for fresh rows (one status, no retry time) is id order.
    oldest_order: ClassVar[tuple[str, ...]] = ("status", "next_retry_at", "id")

    # -- the predicates ------------------------------------------------------------------
    def _state_columns(self, alias: str) -> tuple[str, str]:
        """The state columns, of ``alias`` ("": unqualified, as an UPDATE of the table
        names them)."""
        prefix = f"{alias}." if alias else ""
        q = self.ops.quote
        return f"{prefix}{q('status')}", f"{prefix}{q('next_retry_at')}"

    def fresh_sql(self, alias: str = "c") -> Fragment:
        """Pending rows never tried nor scheduled: the bulk of every claim, and what the
        bucket index holds."""
        status, retry_at = self._state_columns(alias)
        return f"{status} = {PENDING} AND {retry_at} IS NULL", []

    def overdue_sql(self, alias: str = "c") -> Fragment:
        """Failed rows whose retry time has come, and scheduled rows whose delivery time
        has."""
        status, retry_at = self._state_columns(alias)
        now = self.ops.now_sql
        return (f"(({status} = {FAILED} AND ({retry_at} IS NULL OR {retry_at} <= {now})) "
                f"OR ({status} = {PENDING} AND {retry_at} <= {now}))"), []

    def claimable_status_sql(self, alias: str = "c") -> Fragment:
        """The row's own state lets it be claimed (whatever precedes it)."""
        return compose("(({}) OR {})", self.fresh_sql(alias), self.overdue_sql(alias))

    def head_of_aggregate_sql(self, alias: str = "c") -> Fragment:
        """No earlier row of the same aggregate is open (pending, claimed or failed)."""
        q = self.ops.quote
        return (
            f"NOT EXISTS (SELECT 1 FROM {self.ops.table} e{self.probe_hint} "
            f"WHERE e.{q('aggregate_id')} = {alias}.{q('aggregate_id')} "
            f"AND e.{q('status')} IN {OPEN_STATUSES_SQL} AND e.{q('id')} < {alias}.{q('id')})"
        ), []

    def unhindered_sql(self, by_bucket: bool) -> Fragment:
        """No open row can come before the first row of its aggregate in the windows.

        A window is the front of its fresh rows, so no fresh row of an aggregate comes
        before its first row there; only a row outside every window can: one failed,
        scheduled or waiting for a retry (or claimed by a 0.1.0 relay), or, bucket by
        bucket, fresh without a bucket. While there is none, each first row is a head
        without a probe. Asked once a claim, a seek into the claim index or the bucket
        index each. For a vendor whose probe reads committed rows as they are (a row
        being written is not seen by it either); not for SQL Server's, which waits for
        a row being written."""
        q, table = self.ops.quote, self.ops.table
        status, retry_at, bucket = q("status"), q("next_retry_at"), q("bucket")
        waiting = [f"x.{status} IN ({CLAIMED}, {FAILED})",
                   f"x.{status} = {PENDING} AND x.{retry_at} IS NOT NULL"]
        if by_bucket:
            waiting.append(f"x.{bucket} IS NULL AND x.{status} = {PENDING} "
                           f"AND x.{retry_at} IS NULL")
        return "(" + " AND ".join(
            f"NOT EXISTS (SELECT 1 FROM {table} AS x WHERE {condition})"
            for condition in waiting) + ")", []

    def window_sql(self, bucket: Fragment, count: Fragment, *,
                   columns: Sequence[str] = WINDOW_COLUMNS) -> Fragment:
        """The first ``count`` fresh rows of a bucket in id order, their ``columns``
        (from the bucket index): ``bucket`` completes the condition on the bucket column
        (``= b.bucket``, ``IS NULL``), in :attr:`window_order`."""
        q = self.ops.quote
        order = ", ".join(f"f.{q(c)}" for c in self.window_order)
        return compose(
            f"SELECT {', '.join(f'f.{q(c)}' for c in columns)} FROM {self.ops.table} AS f "
            f"WHERE f.{q('bucket')} {{}} AND {{}} ORDER BY {order} LIMIT {{}}",
            bucket, self.fresh_sql("f"), count)

    #: The order of a bucket's window: the bucket index's own key. The bucket is one
    #: value throughout, but PostgreSQL sees that for ``=`` only: ordered by ``id`` alone,
    #: the rows without a bucket (the bucket filler's window) were read through the
    #: primary key, past every done row written without a bucket (whose bucket stays
    #: NULL).
    window_order: ClassVar[tuple[str, ...]] = ("bucket", "id")

    def unbroken_sql(self, alias: str, window: str) -> Fragment:
        """1 while every row of ``window`` up to this one is claimable by its own state,
        0 from the first that is not: a chain stops there."""
        return compose(f"MIN(CASE WHEN {{}} THEN 1 ELSE 0 END) OVER ({window})",
                       self.claimable_status_sql(alias))

    def returned_columns(self, alias: str = "o") -> str:
        return ", ".join(self.ops.select_column(c, alias) for c in CLAIM_COLUMNS)
