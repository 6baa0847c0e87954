"""SQL Server's claim (a part of its dialect, :mod:`.microsoft`): one batch that commits or
rolls back its own transaction, rows other claims hold skipped with READPAST, which under
RCSI needs READCOMMITTEDLOCK beside it; and the one-write design's read-only claim, one
batch in the caller's transaction that locks and writes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from .claim import IN_FLIGHT_READS, ClaimRequest, ClaimSql
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
from .tables import CLAIM_COLUMNS, COLUMNS, OPEN_STATUSES_SQL, Column

#: The claim's reading of its heads: rows other claims hold are skipped (READPAST), the
#: rows taken are held until commit (UPDLOCK), with locking semantics under RCSI too
#: (READCOMMITTEDLOCK); see :attr:`MicrosoftClaim.probe_hint` for the head probe.
_CANDIDATE_HINTS = "WITH (READCOMMITTEDLOCK, READPAST, UPDLOCK, ROWLOCK)"
#: The claim's reading of its candidates, unlocked: rows other claims hold are skipped.
_WINDOW_HINTS = "WITH (READCOMMITTEDLOCK, READPAST)"


def _claimed_type(column: Column) -> str:
    """How the claim's table variable declares ``column``: the table's own type, JSON
    as NVARCHAR(MAX) either way, and NOT NULL for the lease token too (a claimed row
    always has one: the outbox's claimed-at check)."""
    if column.kind == "id":
        return "BIGINT NOT NULL PRIMARY KEY"
    nullable = column.nullable and column.name != "claimed_at"
    return f"{MicrosoftSchema.COLUMN_TYPES[column.kind]} {'NULL' if nullable else 'NOT NULL'}"


#: Types of the claim's table variable, from the contract's columns.
_CLAIMED_TYPES = {c.name: _claimed_type(c) for c in COLUMNS if c.name in CLAIM_COLUMNS}


class MicrosoftClaim(ClaimSql):
    """The claim as one batch that commits or rolls back its own transaction: collect
    the candidates, lock the heads among them, read their chains and update, then hand
    back what was claimed. Rows other claims hold are skipped with READPAST, which under
    RCSI needs READCOMMITTEDLOCK beside it.

    Expired leases are always looked for: SQL Server leaves no dead entries in the
    claim index for the scan of claimed rows to step over (see the planner), so there
    is one batch, not two."""

    qualify_set_columns = True
    # No READPAST on the probe: skipping a competitor's locked earlier row would let a
    # later row of the same aggregate out first. READCOMMITTEDLOCK keeps locking
    # semantics under RCSI (the Azure SQL default), where plain reads would not block.
    probe_hint = " WITH (READCOMMITTEDLOCK)"

    def __init__(self, ops: SqlOps) -> None:
        super().__init__(ops)
        self.candidates = MicrosoftCandidates(self)

    def buckets_param(self, buckets: Sequence[int]) -> Any:
        return json.dumps(list(buckets))

    def window_sql(self, bucket: Fragment, count: Fragment) -> Fragment:
        """TOP for LIMIT; rows other claims hold skipped (a plain read otherwise: the
        heads are locked from :meth:`claim_heads_sql`)."""
        q = self.ops.quote
        return compose(
            f"SELECT TOP ({{}}) f.{q('id')}, f.{q('aggregate_id')}\n"
            f"                FROM {self.ops.table} AS f {_WINDOW_HINTS}\n"
            f"                WHERE f.{q('bucket')} {{}} AND {{}}\n"
            f"                ORDER BY f.{q('id')}",
            count, bucket, self.fresh_sql("f"))

    def claim_declare_sql(self) -> str:
        q = self.ops.quote
        declared = ",\n    ".join(f"{q(c)} {_CLAIMED_TYPES[c]}" for c in CLAIM_COLUMNS)
        return (f"DECLARE @claimed TABLE (\n    {declared}\n);\n"
                f"DECLARE @candidates TABLE (\n    {q('id')} {_CLAIMED_TYPES['id']}\n);\n"
                f"DECLARE @heads TABLE (\n    {q('id')} {_CLAIMED_TYPES['id']},\n"
                f"    {q('aggregate_id')} {_CLAIMED_TYPES['aggregate_id']}\n);\n"
                "DECLARE @taken INT")

    def claim_heads_sql(self, read_only: bool = False) -> Fragment:
        """The second step: lock the first :data:`~.sql.HEADS` heads among the
        candidates, in id order (``@candidates`` is keyed by id, so the read can stop at
        the limit).

        Each candidate is read again under the lock and must still be claimable by its
        own state. The read READPASTs rows other claims hold, but the head probe does
        not (see :attr:`probe_hint`), so a row counts as a head only if no earlier open
        row of its aggregate exists, locked or not. The UPDLOCK on each head stays until
        commit: a competitor's read skips it, so only this claim reads the chain behind
        it.
        """
        q = self.ops.quote
        hints = _WINDOW_HINTS if read_only else _CANDIDATE_HINTS
        return compose(
            f"INSERT INTO @heads ({q('id')}, {q('aggregate_id')})\n"
            f"        SELECT TOP ({{}}) c.{q('id')}, c.{q('aggregate_id')}\n"
            "        FROM @candidates AS k\n"
            f"        JOIN {self.ops.table} AS c {hints} ON c.{q('id')} = k.{q('id')}\n"
            "        WHERE {} AND {}\n"
            f"        ORDER BY k.{q('id')}\n"
            "        OPTION (MAXDOP 1)",
            param(HEADS), self.claimable_status_sql("c"), self.head_of_aggregate_sql("c"),
        )

    def claim_count_sql(self) -> Fragment:
        """How many heads were taken: each one's share of the batch depends on it."""
        return "SELECT @taken = COUNT(*) FROM @heads", []

    def claim_chains_sql(self) -> Fragment:
        """The last step: claim the heads and the rows chained behind them, the first
        :data:`~.sql.LIMIT` of them in id order, each chain no longer than its head's
        share of the batch (:func:`~.sql.chain_share_sql`; none at ``MAX_CHAIN`` 1),
        into ``@claimed``.

        Each chain walks its aggregate's next open rows in id order (the open-rows
        index) and stops at the first that is not claimable by its own state. That walk
        has no READPAST: skipping a locked row there would let a row behind it out
        first. It waits for the lock instead and reads the row's committed state.
        READCOMMITTEDLOCK keeps that true under RCSI; UPDLOCK holds the chain's rows
        from the read to the update.

        Written as UPDATE ... FROM a derived table rather than a CTE: the same plan on
        SQL Server, and Babelfish rejects a CTE followed by UPDATE ... OUTPUT INTO.
        OUTPUT goes INTO a table variable because a bare OUTPUT fails once the table has
        a trigger.
        """
        q = self.ops.quote
        output = ", ".join(f"inserted.{q(c)}" for c in CLAIM_COLUMNS)
        return compose(
            f"UPDATE o SET {self.claim_set_sql('o')}\n"
            f"    OUTPUT {output} INTO @claimed\n"
            f"    FROM {self.ops.table} AS o\n"
            "    JOIN (\n"
            "{}\n"
            f"    ) AS picked ON picked.{q('id')} = o.{q('id')}\n"
            "    OPTION (MAXDOP 1)",
            self.picked_sql("WITH (READCOMMITTEDLOCK, UPDLOCK, ROWLOCK)"),
        )

    def picked_sql(self, chain_hints: str, expired_leases: bool = True) -> Fragment:
        """The ids of the heads and of the rows chained behind them, the first
        :data:`~.sql.LIMIT` in id order, each chain no longer than its head's share of
        the batch, read with ``chain_hints``."""
        q = self.ops.quote
        window = f"ORDER BY c.{q('id')} ROWS UNBOUNDED PRECEDING"
        return compose(
            f"        SELECT TOP ({{}}) x.{q('id')} FROM (\n"
            f"            SELECT h.{q('id')} FROM @heads AS h\n"
            "            UNION ALL\n"
            f"            SELECT r.{q('id')} FROM (\n"
            f"                SELECT k.{q('id')}, k.{q('aggregate_id')}, ROW_NUMBER() OVER ("
            f"ORDER BY k.{q('id')}) AS [rank] FROM @heads AS k\n"
            "            ) AS h CROSS APPLY (\n"
            f"                SELECT TOP ({{}}) c.{q('id')}, {{}} AS unbroken\n"
            f"                FROM {self.ops.table} AS c {chain_hints}\n"
            f"                WHERE c.{q('aggregate_id')} = h.{q('aggregate_id')} "
            f"AND c.{q('status')} IN {OPEN_STATUSES_SQL} AND c.{q('id')} > h.{q('id')}\n"
            f"                ORDER BY c.{q('id')}\n"
            "            ) AS r WHERE r.unbroken = 1\n"
            f"        ) AS x ORDER BY x.{q('id')}",
            param(LIMIT), chain_share_sql("h.[rank]", "@taken", least=False),
            self.unbroken_sql("c", window, expired_leases),
        )

    def read_sql(self, by_bucket: bool = False) -> Fragment:
        """The one-write claim (:meth:`read`) as one batch in the caller's transaction:
        the same steps as :meth:`claim_sql` locking nothing, the aggregates in flight
        (:data:`~.sql.IN_FLIGHT`, one JSON array) passed over, and the rows picked read,
        not updated. The chains' walk still waits for a locked row
        (READCOMMITTEDLOCK, no READPAST), as the claim's does."""
        q = self.ops.quote
        declared = (f"DECLARE @in_flight TABLE (\n    {q('aggregate_id')} "
                    f"{_CLAIMED_TYPES['aggregate_id']} PRIMARY KEY\n);\n"
                    f"DECLARE @candidates TABLE (\n    {q('id')} {_CLAIMED_TYPES['id']}\n);\n"
                    f"DECLARE @heads TABLE (\n    {q('id')} {_CLAIMED_TYPES['id']},\n"
                    f"    {q('aggregate_id')} {_CLAIMED_TYPES['aggregate_id']}\n);\n"
                    "DECLARE @taken INT")
        return self.ops.statement(("read", by_bucket), lambda: compose(
            "SET NOCOUNT ON;\n"
            f"{declared};\n"
            f"INSERT INTO @in_flight ({q('aggregate_id')}) "
            "SELECT DISTINCT [value] FROM OPENJSON({});\n"
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
            param(IN_FLIGHT), self.candidates.sql(by_bucket, read_only=True),
            self.claim_heads_sql(read_only=True), self.claim_count_sql(),
            self.picked_sql("WITH (READCOMMITTEDLOCK)", expired_leases=False),
        ))

    def read(self, cursor: Any, request: ClaimRequest, in_flight: Sequence[str] = ()
             ) -> list[tuple[Any, ...]]:
        sql, params = self.read_sql(request.buckets is not None)
        cursor.execute(sql, bind(params, **self.slots(request, in_flight)))
        return list(cursor.fetchall())

    def in_flight_param(self, aggregates: Sequence[str]) -> Any:
        return json.dumps(list(aggregates))

    def claim_sql(self, by_bucket: bool = False) -> Fragment:
        """The whole claim as one batch with its own transaction: XACT_ABORT plus
        TRY/CATCH, so any error rolls the claim back before it is re-raised.

        SQL Server restores NOCOUNT and XACT_ABORT when a parameterized batch returns;
        a driver sending this as a plain batch would not, so the batch turns both off
        on its way out, after the result or before re-raising an error."""
        q = self.ops.quote
        return self.ops.statement(("claim", by_bucket), lambda: compose(
            "SET NOCOUNT ON;\n"
            "SET XACT_ABORT ON;\n"
            f"{self.claim_declare_sql()};\n"
            "BEGIN TRY\n"
            "    BEGIN TRANSACTION;\n"
            "    {};\n"
            "    {};\n"
            "    {};\n"
            "    {};\n"
            "    COMMIT TRANSACTION;\n"
            "END TRY\n"
            "BEGIN CATCH\n"
            "    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;\n"
            "    SET NOCOUNT OFF;\n"
            "    SET XACT_ABORT OFF;\n"
            "    THROW;\n"
            "END CATCH;\n"
            f"SELECT {self.ops.columns(CLAIM_COLUMNS)} FROM @claimed ORDER BY {q('id')};\n"
            "SET NOCOUNT OFF;\n"
            "SET XACT_ABORT OFF;",
            self.candidates.sql(by_bucket), self.claim_heads_sql(), self.claim_count_sql(),
            self.claim_chains_sql(),
        ))

    def run(self, cursor: Any, request: ClaimRequest) -> list[tuple[Any, ...]]:
        sql, params = self.claim_sql(request.buckets is not None)
        cursor.execute(sql, bind(params, **self.slots(request)))
        return list(cursor.fetchall())

    def statements(self) -> dict[str, Fragment]:
        return {"claim": self.claim_sql(), "claim_by_bucket": self.claim_sql(by_bucket=True)}


class MicrosoftCandidates:
    """The first step of the claim and of the read-only claim: the ids of the rows that
    may be heads, read unlocked into ``@candidates``. A part of :class:`MicrosoftClaim`
    with one job, as :class:`~.mysql.MysqlChains` is of MariaDB's; ``claim`` lends it
    the contract's predicates and the windows."""

    def __init__(self, claim: MicrosoftClaim) -> None:
        self.claim = claim
        self.ops = claim.ops

    def sql(self, by_bucket: bool, read_only: bool = False) -> Fragment:
        """The first step: the candidates' ids, unlocked (rows other claims hold
        skipped). The fresh ones read oldest first (:meth:`oldest_sql`) or
        bucket by bucket (:meth:`bucket_sql`); the overdue ones, few, found
        apart in the claim index. ``read_only``: those of the aggregates in flight
        passed over (:meth:`passing_sql`), no lease counting as expired."""
        q = self.ops.quote
        overdue = (compose("{} AND {}", self.claim.overdue_sql("o", False), self.not_in_flight("o"))
                   if read_only else self.claim.overdue_sql("o"))
        return compose(
            f"INSERT INTO @candidates ({q('id')})\n"
            "        {}\n"
            "        UNION ALL\n"
            f"        SELECT d.{q('id')} FROM (\n"
            f"            SELECT TOP ({{}}) o.{q('id')}\n"
            f"            FROM {self.ops.table} AS o {_WINDOW_HINTS}\n"
            "            WHERE {}\n"
            f"            ORDER BY o.{q('id')}\n"
            "        ) AS d\n"
            "        OPTION (MAXDOP 1)",
            self.bucket_sql(read_only) if by_bucket
            else self.oldest_sql(read_only),
            param(HEADS), overdue,
        )

    def oldest_sql(self, read_only: bool = False) -> Fragment:
        """The first :data:`~.sql.WINDOW` fresh rows in id order (a claim read oldest
        first)."""
        q = self.ops.quote

        def window(count: Fragment) -> Fragment:
            return compose(
                f"SELECT TOP ({{}}) f.{q('id')}, f.{q('aggregate_id')}\n"
                f"            FROM {self.ops.table} AS f {_WINDOW_HINTS}\n"
                "            WHERE {}\n"
                f"            ORDER BY f.{q('id')}", count, self.claim.fresh_sql("f"))
        if read_only:
            return compose(f"SELECT w.{q('id')} FROM (\n            {{}}\n        ) AS w",
                           self.passing_sql(window, param(WINDOW)))
        return compose(
            f"SELECT w.{q('id')} FROM (\n"
            f"            SELECT TOP ({{}}) f.{q('id')}\n"
            f"            FROM {self.ops.table} AS f {_WINDOW_HINTS}\n"
            "            WHERE {}\n"
            f"            ORDER BY f.{q('id')}\n"
            "        ) AS w",
            param(WINDOW), self.claim.fresh_sql("f"))

    def not_in_flight(self, alias: str) -> Fragment:
        """The row's aggregate has no rows in flight (``@in_flight``, a read-only
        claim's)."""
        q = self.ops.quote
        return (f"NOT EXISTS (SELECT 1 FROM @in_flight AS i "
                f"WHERE i.{q('aggregate_id')} = {alias}.{q('aggregate_id')})"), []

    def passing_sql(self, window: Callable[[Fragment], Fragment], count: Fragment
                    ) -> Fragment:
        """A read-only claim's window of ``count`` rows: ``window`` read
        :data:`~.claim.IN_FLIGHT_READS` times as wide, then the aggregates in flight
        passed over (as on PostgreSQL: a bounded read, whatever is in flight)."""
        q = self.ops.quote
        return compose(
            f"SELECT TOP ({{}}) p.{q('id')}, p.{q('aggregate_id')} FROM (\n"
            "                {}\n"
            f"                ) AS p WHERE {{}} ORDER BY p.{q('id')}",
            count, window(compose(f"{{}} * {IN_FLIGHT_READS}", count)),
            self.not_in_flight("p"))

    def bucket_sql(self, read_only: bool = False) -> Fragment:
        """Of the windows of the buckets in :data:`~.sql.BUCKETS` and of the rows
        without a bucket, the first row of each aggregate, which alone can be a head (a
        claim read bucket by bucket)."""
        q = self.ops.quote
        bucket = compose("= b.{}", (q("bucket"), []))
        if read_only:
            windows = (
                self.passing_sql(lambda count: self.claim.window_sql(bucket, count), param(WINDOW)),
                self.passing_sql(lambda count: self.claim.window_sql(("IS NULL", []), count),
                                 param(HEADS)))
        else:
            windows = (self.claim.window_sql(bucket, param(WINDOW)),
                       self.claim.window_sql(("IS NULL", []), param(HEADS)))
        return compose(
            f"SELECT x.{q('id')} FROM (\n"
            f"            SELECT w.{q('id')}, ROW_NUMBER() OVER (\n"
            f"                PARTITION BY w.{q('aggregate_id')} ORDER BY w.{q('id')}) AS [first]\n"
            "            FROM (\n"
            f"                SELECT f.{q('id')}, f.{q('aggregate_id')}\n"
            "                FROM OPENJSON({}) WITH ([bucket] TINYINT '$') AS b\n"
            "                CROSS APPLY (\n"
            "                {}\n"
            "                ) AS f\n"
            "                UNION ALL\n"
            f"                SELECT n.{q('id')}, n.{q('aggregate_id')} FROM (\n"
            "                {}\n"
            "                ) AS n\n"
            "            ) AS w\n"
            "        ) AS x\n"
            "        WHERE x.[first] = 1",
            param(BUCKETS), *windows,
        )
