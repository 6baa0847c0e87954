"""SQL Server's claim (a part of its dialect, :mod:`.microsoft`): one batch in the caller's
transaction that reads the relay's own buckets and writes nothing but its table
variables. RCSI-safe: the windows skip rows being written (READPAST, which under RCSI
needs READCOMMITTEDLOCK beside it), and the reads that must not pass an earlier row of an
aggregate by wait for it (READCOMMITTEDLOCK alone)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .claim import WINDOW_COLUMNS, ClaimRequest, ClaimSql
from .microsoft_schema import MicrosoftSchema
from .ops import SqlOps
from .sql import (
    BUCKETS,
    HEADS,
    IN_FLIGHT,
    LIMIT,
    WINDOW,
    Fragment,
    bind,
    chain_share_sql,
    compose,
    param,
)
from .tables import COLUMNS, OPEN_STATUSES_SQL

#: The claim's reading of its windows and heads: a row being written (a publisher's
#: INSERT not yet committed) is skipped, never waited for, with locking semantics under
#: RCSI too, where READPAST needs READCOMMITTEDLOCK beside it.
_WINDOW_HINTS = "WITH (READCOMMITTEDLOCK, READPAST)"
#: The chains' walk: it waits for a row being written instead of skipping it, since a
#: skipped row would let a row behind it out first; and it reads the row's committed
#: state under RCSI too.
_CHAIN_HINTS = "WITH (READCOMMITTEDLOCK)"

#: How the batch's table variables declare the outbox's ids and aggregates.
_ID_TYPE = "BIGINT NOT NULL PRIMARY KEY"
_AGGREGATE_TYPE = next(f"{MicrosoftSchema.COLUMN_TYPES[c.kind]} NOT NULL" for c in COLUMNS
                       if c.name == "aggregate_id")
#: The buckets of a claim read bucket by bucket (:data:`~.sql.BUCKETS`, one JSON array).
_BUCKETS_SQL = "OPENJSON({}) WITH ([bucket] TINYINT '$') AS b"


class MicrosoftClaim(ClaimSql):
    """The claim as one batch in the caller's transaction: collect the candidates, judge
    the heads among them, read their chains, then read back what was picked. Nothing is
    locked beyond a statement: no other relay claims from these buckets. The aggregates
    in flight come as one JSON array (:data:`~.sql.IN_FLIGHT`) into a table variable
    that every read passes them over with."""

    # No READPAST on the probe: skipping an earlier row of the aggregate being written
    # would let a later row of the same aggregate out first. READCOMMITTEDLOCK makes it
    # wait under RCSI (the Azure SQL default) too, where a plain read would not.
    probe_hint = " WITH (READCOMMITTEDLOCK)"

    def __init__(self, ops: SqlOps) -> None:
        super().__init__(ops)
        self.candidates = MicrosoftCandidates(self)

    def buckets_param(self, buckets: Sequence[int]) -> Any:
        return json.dumps(list(buckets))

    def in_flight_param(self, aggregates: Sequence[str]) -> Any:
        return json.dumps(list(aggregates))

    def window_sql(self, bucket: Fragment, count: Fragment, *,
                   columns: Sequence[str] = WINDOW_COLUMNS) -> Fragment:
        """TOP for LIMIT; rows being written skipped (:data:`_WINDOW_HINTS`)."""
        q = self.ops.quote
        return compose(
            f"SELECT TOP ({{}}) {', '.join(f'f.{q(c)}' for c in columns)}\n"
            f"                FROM {self.ops.table} AS f {_WINDOW_HINTS}\n"
            f"                WHERE f.{q('bucket')} {{}} AND {{}}\n"
            f"                ORDER BY f.{q('id')}",
            count, bucket, self.fresh_sql("f"))

    def declare_sql(self) -> str:
        """The batch's table variables: the aggregates in flight, the candidates, the
        heads, and how many heads were taken."""
        q = self.ops.quote
        return (f"DECLARE @in_flight TABLE (\n    {q('aggregate_id')} {_AGGREGATE_TYPE} "
                "PRIMARY KEY\n);\n"
                f"DECLARE @candidates TABLE (\n    {q('id')} {_ID_TYPE}\n);\n"
                f"DECLARE @heads TABLE (\n    {q('id')} {_ID_TYPE},\n"
                f"    {q('aggregate_id')} {_AGGREGATE_TYPE}\n);\n"
                "DECLARE @taken INT")

    def in_flight_sql(self) -> Fragment:
        """The aggregates in flight, into ``@in_flight``."""
        q = self.ops.quote
        return compose(f"INSERT INTO @in_flight ({q('aggregate_id')}) "
                       "SELECT DISTINCT [value] FROM OPENJSON({})", param(IN_FLIGHT))

    def heads_sql(self) -> Fragment:
        """The second step: the first :data:`~.sql.HEADS` heads among the candidates,
        in id order (``@candidates`` is keyed by id, so the read can stop at the limit).

        Each candidate is read again and must still be claimable by its own state. The
        read skips a row being written, but the head probe does not (see
        :attr:`probe_hint`), so a row counts as a head only if no earlier open row of
        its aggregate exists, committed or not.
        """
        q = self.ops.quote
        return compose(
            f"INSERT INTO @heads ({q('id')}, {q('aggregate_id')})\n"
            f"SELECT TOP ({{}}) c.{q('id')}, c.{q('aggregate_id')}\n"
            "FROM @candidates AS k\n"
            f"JOIN {self.ops.table} AS c {_WINDOW_HINTS} ON c.{q('id')} = k.{q('id')}\n"
            "WHERE {} AND {}\n"
            f"ORDER BY k.{q('id')}\n"
            "OPTION (MAXDOP 1)",
            param(HEADS), self.claimable_status_sql("c"), self.head_of_aggregate_sql("c"),
        )

    def count_sql(self) -> Fragment:
        """How many heads were taken: each one's share of the batch depends on it."""
        return "SELECT @taken = COUNT(*) FROM @heads", []

    def picked_sql(self) -> Fragment:
        """The ids of the heads and of the rows chained behind them, the first
        :data:`~.sql.LIMIT` in id order, each chain no longer than its head's share of
        the batch (:func:`~.sql.chain_share_sql`; none at ``MAX_CHAIN`` 1).

        Each chain walks its aggregate's next open rows in id order (the open-rows
        index) and stops at the first that is not claimable by its own state; the walk
        waits for a row being written rather than skip it (:data:`_CHAIN_HINTS`)."""
        q = self.ops.quote
        window = f"ORDER BY c.{q('id')} ROWS UNBOUNDED PRECEDING"
        return compose(
            f"    SELECT TOP ({{}}) x.{q('id')} FROM (\n"
            f"        SELECT h.{q('id')} FROM @heads AS h\n"
            "        UNION ALL\n"
            f"        SELECT r.{q('id')} FROM (\n"
            f"            SELECT k.{q('id')}, k.{q('aggregate_id')}, ROW_NUMBER() OVER ("
            f"ORDER BY k.{q('id')}) AS [rank] FROM @heads AS k\n"
            "        ) AS h CROSS APPLY (\n"
            f"            SELECT TOP ({{}}) c.{q('id')}, {{}} AS unbroken\n"
            f"            FROM {self.ops.table} AS c {_CHAIN_HINTS}\n"
            f"            WHERE c.{q('aggregate_id')} = h.{q('aggregate_id')} "
            f"AND c.{q('status')} IN {OPEN_STATUSES_SQL} AND c.{q('id')} > h.{q('id')}\n"
            f"            ORDER BY c.{q('id')}\n"
            "        ) AS r WHERE r.unbroken = 1\n"
            f"    ) AS x ORDER BY x.{q('id')}",
            param(LIMIT), chain_share_sql("h.[rank]", "@taken", least=False),
            self.unbroken_sql("c", window),
        )

    def claim_sql(self, by_bucket: bool = False) -> Fragment:
        """The whole claim as one batch: the steps above, then the rows picked read
        back. NOCOUNT is on while the table variables fill (their row counts would come
        back as results before the rows) and off again before the rows are read, so a
        connection keeps its row counts whichever way the driver sends the batch."""
        q = self.ops.quote
        return self.ops.statement(("claim", by_bucket), lambda: compose(
            "SET NOCOUNT ON;\n"
            f"{self.declare_sql()};\n"
            "{};\n"
            "{};\n"
            "{};\n"
            "{};\n"
            "SET NOCOUNT OFF;\n"
            f"SELECT {self.returned_columns()} FROM {self.ops.table} AS o\n"
            "JOIN (\n"
            "{}\n"
            f") AS picked ON picked.{q('id')} = o.{q('id')}\n"
            f"ORDER BY o.{q('id')}\n"
            "OPTION (MAXDOP 1)",
            self.in_flight_sql(), self.candidates.sql(by_bucket), self.heads_sql(),
            self.count_sql(), self.picked_sql(),
        ))

    def run(self, cursor: Any, request: ClaimRequest, in_flight: Sequence[str] = ()
            ) -> list[tuple[Any, ...]]:
        sql, params = self.claim_sql(request.buckets is not None)
        cursor.execute(sql, bind(params, **self.slots(request, in_flight)))
        return list(cursor.fetchall())

    def statements(self) -> dict[str, Fragment]:
        return {"claim": self.claim_sql(), "claim_by_bucket": self.claim_sql(by_bucket=True)}


class MicrosoftCandidates:
    """The first step of the claim: the ids of the rows that may be heads, into
    ``@candidates``. A part of :class:`MicrosoftClaim` with one job, as
    :class:`~.mysql.MysqlChains` is of MariaDB's; ``claim`` lends it the contract's
    predicates and the windows."""

    def __init__(self, claim: MicrosoftClaim) -> None:
        self.claim = claim
        self.ops = claim.ops

    def sql(self, by_bucket: bool) -> Fragment:
        """The first step: the candidates' ids, the aggregates in flight passed over.
        The fresh ones read oldest first (:meth:`oldest_sql`) or bucket by bucket
        (:meth:`bucket_sql`); the overdue ones, few, found apart in the claim index, of
        the claim's buckets only when it reads bucket by bucket."""
        q = self.ops.quote
        buckets = (compose(f" AND o.{q('bucket')} IN (SELECT b.{q('bucket')} FROM "
                           f"{_BUCKETS_SQL})", param(BUCKETS))
                   if by_bucket else ("", []))
        return compose(
            f"INSERT INTO @candidates ({q('id')})\n"
            "{}\n"
            "UNION ALL\n"
            f"SELECT d.{q('id')} FROM (\n"
            f"    SELECT TOP ({{}}) o.{q('id')}\n"
            f"    FROM {self.ops.table} AS o {_WINDOW_HINTS}\n"
            "    WHERE {}{} AND {}\n"
            f"    ORDER BY o.{q('id')}\n"
            ") AS d\n"
            "OPTION (MAXDOP 1)",
            self.bucket_sql() if by_bucket else self.oldest_sql(),
            param(HEADS), self.claim.overdue_sql("o"), buckets, self.not_in_flight("o"),
        )

    def oldest_sql(self) -> Fragment:
        """The first row of each aggregate in the first :data:`~.sql.WINDOW` fresh rows in
        id order (a claim read oldest first), rows without a bucket among them."""
        q = self.ops.quote
        window = compose(
            f"SELECT TOP ({{}}) f.{q('id')}, f.{q('aggregate_id')}\n"
            f"                FROM {self.ops.table} AS f {_WINDOW_HINTS}\n"
            "                WHERE {}\n"
            f"                ORDER BY f.{q('id')}", param(WINDOW), self.claim.fresh_sql("f"))
        return self.firsts_sql(compose("(\n            {}\n    ) AS w", window))

    def bucket_sql(self) -> Fragment:
        """The first row of each aggregate in the windows of the buckets in
        :data:`~.sql.BUCKETS` (a claim read bucket by bucket)."""
        q = self.ops.quote
        bucket = compose("= b.{}", (q("bucket"), []))
        return self.firsts_sql(compose(
            f"{_BUCKETS_SQL}\n    CROSS APPLY (\n            {{}}\n    ) AS w", param(BUCKETS),
            self.claim.window_sql(bucket, param(WINDOW))))

    def firsts_sql(self, windows: Fragment) -> Fragment:
        """Of the rows of ``windows`` (``w``), the aggregates in flight passed over, the
        first row of each aggregate, which alone can be a head."""
        q = self.ops.quote
        return compose(
            f"SELECT x.{q('id')} FROM (\n"
            f"    SELECT w.{q('id')}, ROW_NUMBER() OVER (\n"
            f"        PARTITION BY w.{q('aggregate_id')} ORDER BY w.{q('id')}) AS [first]\n"
            "    FROM {}\n"
            "    WHERE {}\n"
            ") AS x\n"
            "WHERE x.[first] = 1",
            windows, self.not_in_flight("w"))

    def not_in_flight(self, alias: str) -> Fragment:
        """The row's aggregate has no rows in flight (``@in_flight``)."""
        q = self.ops.quote
        return (f"NOT EXISTS (SELECT 1 FROM @in_flight AS i "
                f"WHERE i.{q('aggregate_id')} = {alias}.{q('aggregate_id')})"), []
