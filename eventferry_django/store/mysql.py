"""MariaDB 10.6+ and MySQL 8.0.16+: all of their SQL.

Neither has filtered indexes. The claim index keeps ``status`` as its leading column, so
the claim scan reads only the key ranges of the open statuses (0, 1, 3) and never walks
the done and dead rows: the same cost profile as the filtered index elsewhere, paid for
with index entries for closed rows. INCLUDE columns become trailing key columns.

MySQL has no ``CREATE INDEX IF NOT EXISTS`` (MariaDB has), so each index is guarded by
an ``information_schema`` lookup and a prepared statement, which both accept.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from typing import Any, ClassVar

from ..contract import OPEN
from ..naming import TableName
from .base import Dialect
from .claim import WINDOW_COLUMNS, ClaimRequest, ClaimSql
from .closed_rows import ClosedRowsSql, codes
from .inbox_sql import InboxSql
from .ops import SqlOps
from .purge import PurgeSql
from .schema import SchemaSql
from .sql import HEADS, WINDOW, Fragment, Slot, bind, chain_share, compose, join, param
from .tables import INBOX_KEY, Check, Index, Table


class MysqlClosedRows(ClosedRowsSql):
    """The history pipeline's SQL on MariaDB/MySQL."""

    def utc_literal(self, value: dt.datetime) -> str:
        return f"CAST('{self.archived_key_text(value)}' AS DATETIME(3))"

    def timestamp_text_sql(self, column: str) -> str:
        return f"DATE_FORMAT({self.ops.quote(column)}, '%Y-%m-%d %H:%i:%s.%f')"

    def purge_archived_sql(self, statuses: Sequence[int]) -> str:
        q = self.ops.quote
        return (
            f"DELETE o FROM {self.ops.table} AS o JOIN JSON_TABLE(%s, '$[*]' COLUMNS ("
            "id BIGINT PATH '$[0]', processed_at DATETIME(3) PATH '$[1]')) AS a "
            f"ON o.{q('id')} = a.id AND o.{q('processed_at')} = a.processed_at "
            f"WHERE o.{q('status')} IN ({codes(statuses)})"
        )


class MysqlSchema(SchemaSql):
    """The DDL of mysql's tables."""

    supports_partial_index = False

    COLUMN_TYPES: ClassVar[dict[str, str]] = {
        "id": "BIGINT NOT NULL AUTO_INCREMENT",
        "text64": "VARCHAR(64)",
        "text255": "VARCHAR(255)",
        "text4000": "VARCHAR(4000)",
        "json": "JSON",
        "text": "MEDIUMTEXT",
        "tinyint": "TINYINT UNSIGNED",
        "int": "INT",
        "timestamp": "DATETIME(3)",
    }

    DEFAULTS: ClassVar[dict[str, str]] = {
        "empty_json": "('{}')",
        "zero": "0",
        "now": "(UTC_TIMESTAMP(3))",
    }

    def json_check(self, column: str) -> str:
        # MySQL's JSON type validates already; on MariaDB JSON is LONGTEXT and this
        # CHECK is what rejects malformed documents.
        return f"JSON_VALID({self.ops.quote(column)})"

    @staticmethod
    def schema_expression(name: TableName) -> str:
        return f"'{name.schema}'" if name.schema else "DATABASE()"

    def table_options(self, table: Table) -> str:
        # Binary collation: message and aggregate ids compare exactly, as elsewhere.
        return " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"

    def create_index_statements(self, index: Index, table: Table) -> list[str]:
        create = f"CREATE INDEX {self.index_definition(index, table)}"
        return self._guarded(f"'{create}'", "statistics", table,
                             f"index_name = '{index.name}'")

    def add_check_statements(self, table: Table, check: Check, reason: str) -> list[str]:
        # The server's own message names the constraint; the name carries ``reason``.
        add = f"ALTER TABLE {self.qualified(table)} ADD {self.check_definition(table, check)}"
        return self._guarded(f"'{add}'", "table_constraints", table,
                             f"constraint_name = '{check.name}'")

    def drop_check_statements(self, table: Table, check: Check) -> list[str]:
        # MariaDB drops a check as a CONSTRAINT only, MySQL before 8.0.19 as a CHECK only.
        drop = f"ALTER TABLE {self.qualified(table)} DROP"
        name = self.ops.quote(check.name)
        return self._guarded(
            f"IF(VERSION() LIKE '%MariaDB%', '{drop} CONSTRAINT {name}', '{drop} CHECK {name}')",
            "table_constraints", table, f"constraint_name = '{check.name}'", exists=True)

    def _guarded(self, statement: str, catalog: str, table: Table, condition: str, *,
                 exists: bool = False) -> list[str]:
        """Run the statement the SQL expression ``statement`` spells only if
        ``information_schema.<catalog>`` lists nothing of ``table`` matching
        ``condition`` (with ``exists``: something): MySQL has no IF NOT EXISTS for
        indexes and constraints (MariaDB has), so the catalog decides for both."""
        return [
            f"SET @eventferry_ddl = (SELECT IF(COUNT(*) {'>' if exists else '='} 0, "
            f"{statement}, 'DO 0') FROM information_schema.{catalog} "
            f"WHERE table_schema = {self.schema_expression(table.name)} "
            f"AND table_name = '{table.name.table}' AND {condition})",
            "PREPARE eventferry_ddl FROM @eventferry_ddl",
            "EXECUTE eventferry_ddl",
            "DEALLOCATE PREPARE eventferry_ddl",
        ]


class MysqlPurge(PurgeSql):
    """Batch deletes on MariaDB/MySQL: a DELETE with its own ORDER BY and LIMIT."""

    def delete_batch(
        self, cursor: Any, table: str, condition: str, params: Sequence[Any], limit: int,
        order: Sequence[str] = ("id",),
    ) -> int:
        """``order`` makes the LIMIT deterministic (safe to replicate by statement), and
        the scan stops at the limit instead of sorting every matching row for each
        batch."""
        columns = ", ".join(self.ops.quote(column) for column in order)
        cursor.execute(
            f"DELETE FROM {table} WHERE {condition} ORDER BY {columns} LIMIT %s",
            [*params, limit],
        )
        return int(cursor.rowcount)


class MysqlInbox(InboxSql):
    def record_message_sql(self, table: Table) -> str:
        # No ON CONFLICT here. IGNORE turns only the duplicate key into "0 rows": the
        # values are validated before they get here, so there is nothing else for it to
        # hide. (ON DUPLICATE KEY UPDATE would report 1 row either way: Django connects
        # with CLIENT_FOUND_ROWS.)
        return (f"INSERT IGNORE INTO {self.qualified(table)} ({self.ops.columns(INBOX_KEY)}) "
                "VALUES (%s, %s)")


class MysqlOps(SqlOps):
    vendor = "mysql"
    now_sql = "UTC_TIMESTAMP(3)"
    skip_locked_sql = " FOR UPDATE SKIP LOCKED"

    def now_plus_sql(self) -> str:
        return "TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3))"

    def deleted_column(self, column: str) -> tuple[str, str] | None:
        # MariaDB has DELETE ... RETURNING, MySQL has not; the SQL here serves both.
        return None

    def offset_param(self, milliseconds: int) -> Any:
        return milliseconds * 1000

    def is_transient(self, exc: BaseException) -> bool:
        # 1213: deadlock victim; 1205: lock wait timeout. InnoDB rolls the transaction back.
        return bool(exc.args) and exc.args[0] in (1213, 1205)


#: The slots of the statements built a branch per bucket or head, and the id a candidate,
#: a head or a row read back is shown as in the committed statements.
BUCKET, AGGREGATE, STATUS, HEAD, SHARE, ID = (Slot(name) for name in (
    "bucket", "aggregate", "status", "head", "share", "id"))


class MysqlChains:
    """The rows that chain onto a claim's heads, read without LATERAL: a part of
    :class:`MysqlClaim` with one job. ``claimable`` is the claim's condition that a row's
    own state lets it be claimed (on the alias ``c``)."""

    def __init__(self, ops: SqlOps, claimable: Fragment) -> None:
        self.ops = ops
        self.claimable = claimable

    def read(self, cursor: Any, heads: dict[str, tuple[int, int]]) -> list[int]:
        """Ids of the rows behind ``heads`` (aggregate -> its head's id and its share:
        see :func:`~.sql.chain_share`) that chain onto them: each aggregate's next open
        rows in id order, up to its share, stopping at the first that is not claimable
        by its own state.

        No LATERAL here, and the open-rows index is ordered by status before id, so
        "the next open rows in id order" is read as one index range per open status and
        head (:meth:`chain_sql`), each in id order and cut at ``share``, as one UNION ALL
        in one round trip, and merged here: a claim reads at most three times what it
        hands out, however deep the aggregates' backlogs are.
        """
        chaining = {aggregate: head for aggregate, head in heads.items() if head[1]}
        sql, _ = self.chains_sql(len(chaining))
        _, branch = self.chain_sql()
        cursor.execute(sql, [
            value for aggregate, (head, share) in chaining.items() for status in OPEN
            for value in bind(branch, aggregate=aggregate, status=status, head=head,
                              share=share)])
        rows: dict[str, list[tuple[int, int]]] = {}
        for row_id, aggregate, claimable in cursor.fetchall():
            rows.setdefault(aggregate, []).append((row_id, claimable))
        chained = []
        for aggregate, following in rows.items():
            for row_id, claimable in sorted(following)[:chaining[aggregate][1]]:
                if not claimable:
                    break
                chained.append(row_id)
        return chained

    def chains_sql(self, heads: int) -> Fragment:
        """The chain read of :meth:`read` for ``heads`` heads: a branch per head and
        open status (:meth:`chain_sql`), each bound on its own."""
        return self.ops.statement(("chains", heads), lambda: join(
            [self.chain_sql()] * (heads * len(OPEN)), "\nUNION ALL\n"))

    def chain_sql(self) -> Fragment:
        """One branch of :meth:`read`: the open rows of one status behind one head."""
        q = self.ops.quote
        return self.ops.statement("chain", lambda: compose(
            f"(SELECT c.{q('id')}, c.{q('aggregate_id')}, CASE WHEN {{}} THEN 1 ELSE 0 END "
            f"FROM {self.ops.table} AS c WHERE c.{q('aggregate_id')} = {{}} "
            f"AND c.{q('status')} = {{}} AND c.{q('id')} > {{}} "
            f"ORDER BY c.{q('id')} LIMIT {{}})",
            self.claimable, param(AGGREGATE), param(STATUS), param(HEAD), param(SHARE)))


class MysqlClaim(ClaimSql):
    """The claim as several plain reads in the caller's transaction (no LATERAL here):
    read the windows (oldest first, or of each bucket), probe the first row of each
    aggregate in them as a head, find the overdue heads, read their chains, read the
    rows back. The aggregates in flight are passed over here, after the reads (bound in
    each of the windows' statements instead, they would be sent once a bucket). Plain
    reads see one snapshot a statement (READ COMMITTED, Django's default for MySQL), and
    each head is judged in the statement that finds it, so none is judged again."""

    def __init__(self, ops: SqlOps) -> None:
        super().__init__(ops)
        self.chains = MysqlChains(ops, self.claimable_status_sql("c"))

    def run(self, cursor: Any, request: ClaimRequest, in_flight: Sequence[str] = ()
            ) -> list[tuple[Any, ...]]:
        passing = set(in_flight)
        slots = self.slots(request)
        found = [row for row in self._heads(cursor, request, slots, passing)
                 if row[1] not in passing][:slots["heads"]]
        if not found:
            return []
        cursor.execute(*self.read_back_sql(self._chained(cursor, request, found)))
        return list(cursor.fetchall())

    def _heads(self, cursor: Any, request: ClaimRequest, slots: dict[str, Any],
               passing: Collection[str]) -> list[tuple[Any, ...]]:
        """The candidate heads, fresh (oldest first or bucket by bucket) and overdue, in
        id order: more than the claim takes, cut by the caller."""
        found = self.fresh_heads(cursor, request.buckets, slots, passing)
        sql, params = self.overdue_heads_sql(request.buckets)
        # An overdue row in flight is still a head: found, then passed over.
        cursor.execute(sql, bind(params, **dict(slots, heads=slots["heads"] + request.passing)))
        return sorted(found + list(cursor.fetchall()))

    def _chained(self, cursor: Any, request: ClaimRequest, heads: list[tuple[Any, ...]]
                 ) -> list[int]:
        """The ids of ``heads`` (id, aggregate) and of the rows chained behind them,
        each chain within its head's share, the first ``request.rows`` in id order."""
        ids = [row[0] for row in heads]
        shares = {aggregate: chain_share(request.max_chain, request.rows, len(heads), rank)
                  for rank, (_, aggregate) in enumerate(heads, start=1)}
        if not any(shares.values()):
            return ids
        return sorted(ids + self.chains.read(
            cursor, {a: (i, shares[a]) for i, a in heads}))[:request.rows]

    def statements(self) -> dict[str, Fragment]:
        """Shown for one bucket (:data:`BUCKET`), one candidate and one head
        (:data:`ID`): the statements built per request repeat their bucket's,
        candidate's or head's part."""
        return {"oldest_window": self.oldest_window_sql(),
                "bucket_windows": self.windows_sql(1),
                "unhindered": self.unhindered_check_sql(False),
                "unhindered_by_bucket": self.unhindered_check_sql(True),
                "fresh_heads": self.fresh_heads_sql([ID]),
                "overdue_heads": self.overdue_heads_sql(),
                "overdue_heads_by_bucket": self.overdue_heads_sql([BUCKET]),
                "chains": self.chains.chains_sql(1), "read_back": self.read_back_sql([ID])}

    def buckets_param(self, buckets: Sequence[int]) -> Any:
        # A window a bucket, each bucket bound in its own (:meth:`windows_sql`).
        return None

    # -- fresh heads ---------------------------------------------------------------------
    # Fresh rows in id order alone: MariaDB does not count ``next_retry_at IS NULL`` as a
    # constant of the claim index's prefix, so the index's full order made it sort every
    # fresh row (4 s a claim at 150,000 pending rows).
    oldest_order = ("id",)
    # And MariaDB sorts a bucket's rows without a bucket (IS NULL: the bucket filler's
    # window) unless asked for id order alone.
    window_order = ("id",)

    def oldest_window_sql(self) -> Fragment:
        """The window of a claim read oldest first, from the claim index."""
        return self.ops.statement("oldest_window", lambda: self.oldest_sql("f"))

    # The indexes named: with ``id`` in the condition the optimizer may otherwise walk
    # the primary key through every done row (25,000 rows read for 35 heads), or read a
    # bucket's rows through the claim index and sort them.
    def oldest_sql(self, alias: str = "f", count: Fragment | None = None, *,
                   columns: Sequence[str] = WINDOW_COLUMNS) -> Fragment:
        return self._forced(super().oldest_sql(alias, count, columns=columns), alias,
                            self.ops.name.claim_index)

    def window_sql(self, bucket: Fragment, count: Fragment, *,
                   columns: Sequence[str] = WINDOW_COLUMNS) -> Fragment:
        return self._forced(super().window_sql(bucket, count, columns=columns), "f",
                            self.ops.name.bucket_index)

    def _index(self, index: str) -> str:
        return f"FORCE INDEX ({self.ops.quote(index)})"

    def _forced(self, fragment: Fragment, alias: str, index: str) -> Fragment:
        sql, params = fragment
        return sql.replace(f" AS {alias} ", f" AS {alias} {self._index(index)} ", 1), params

    def windows_sql(self, buckets: int) -> Fragment:
        """The windows of ``buckets`` buckets (:meth:`bucket_window_sql` each) as one
        statement."""
        return self.ops.statement(("windows", buckets), lambda: join(
            [self.bucket_window_sql()] * buckets, "\nUNION ALL\n"))

    def bucket_window_sql(self) -> Fragment:
        """The window of one bucket, the bucket bound as the slot ``bucket``."""
        return self.ops.statement("bucket_window", lambda: compose(
            "({})", self.window_sql(compose("= {}", param(BUCKET)), param(WINDOW))))

    def fresh_heads(self, cursor: Any, buckets: Sequence[int] | None, slots: dict[str, Any],
                    passing: Collection[str]) -> list[tuple[Any, ...]]:
        """Ids and aggregates of the fresh heads: the first row of each aggregate in the
        window (oldest first) or the windows of ``buckets``, the aggregates ``passing``
        passed over, probed as a head while a row could stand before it, the oldest
        :data:`~.sql.HEADS` kept."""
        if buckets is None:
            sql, params = self.oldest_window_sql()
            cursor.execute(sql, bind(params, **slots))
        else:
            sql, _ = self.windows_sql(len(buckets))
            branch = self.bucket_window_sql()[1]
            cursor.execute(sql, [value for bucket in buckets
                                 for value in bind(branch, **slots, bucket=bucket)])
        firsts: dict[str, int] = {}
        for row_id, aggregate in sorted(cursor.fetchall()):
            if aggregate not in passing:
                firsts.setdefault(aggregate, row_id)
        if not firsts:
            return []
        # Asked after the windows were read, so a row that could stand before one of
        # their first rows then is seen here (a failed row changes only by its relay).
        cursor.execute(*self.unhindered_check_sql(buckets is not None))
        if cursor.fetchone()[0]:
            return sorted((row_id, aggregate) for aggregate, row_id in firsts.items()
                          )[:slots["heads"]]
        sql, params = self.fresh_heads_sql(sorted(firsts.values()))
        cursor.execute(sql, bind(params, **slots))
        return list(cursor.fetchall())

    def unhindered_check_sql(self, by_bucket: bool) -> Fragment:
        """Whether the first rows of the windows are heads without a probe
        (:meth:`~.ClaimSql.unhindered_sql`)."""
        return self.ops.statement(("unhindered", by_bucket),
                                  lambda: compose("SELECT {}", self.unhindered_sql(by_bucket)))

    def fresh_heads_sql(self, candidates: Sequence[Any]) -> Fragment:
        """The fresh heads among the ``candidates`` ids (in id order, so the scan of the
        primary key stops at the limit)."""
        ops, q = self.ops, self.ops.quote
        return compose(
            f"SELECT c.{q('id')}, c.{q('aggregate_id')} FROM {ops.table} AS c "
            f"WHERE c.{{}} AND {{}} AND {{}} ORDER BY c.{q('id')} LIMIT {{}}",
            ops.ids_condition(candidates), self.fresh_sql("c"), self.head_of_aggregate_sql("c"),
            param(HEADS),
        )

    def overdue_heads_sql(self, buckets: Sequence[Any] | None = None) -> Fragment:
        """Overdue heads (few, found apart in the claim index): those whose time has
        come, with ``buckets`` of those buckets only (one placeholder each, a statement
        built per request). The overdue rows are read apart from any other kind: as one
        OR with the expired leases that 0.1.0's claim also looked for, MariaDB read every
        open row of the claim index (114,000 rows, 0.3 s, for none)."""
        ops, q = self.ops, self.ops.quote

        def heads(restriction: Fragment) -> Fragment:
            return compose(
                f"SELECT c.{q('id')}, c.{q('aggregate_id')} FROM {ops.table} AS c "
                f"WHERE {{}}{{}} AND {{}} ORDER BY c.{q('id')} LIMIT {{}}",
                self.overdue_sql("c"), restriction, self.head_of_aggregate_sql("c"),
                param(HEADS))
        if buckets is None:
            return ops.statement("overdue", lambda: heads(("", [])))
        return heads((f" AND c.{q('bucket')} IN ({', '.join(['%s'] * len(buckets))})",
                      list(buckets)))

    # -- the rest of the claim -----------------------------------------------------------
    def read_back_sql(self, ids: Sequence[Any]) -> Fragment:
        """The rows ``ids`` names, as the claim hands them out."""
        q = self.ops.quote
        return compose(f"SELECT {self.returned_columns()} FROM {self.ops.table} AS o "
                       f"WHERE o.{{}} ORDER BY o.{q('id')}", self.ops.ids_condition(ids))

    def head_of_aggregate_sql(self, alias: str = "c") -> Fragment:
        """No earlier row of the same aggregate is open, asked per open status as "the
        aggregate's first row in that status is not before this one": three index dives,
        each reading one entry of the open-rows index. The candidate's id stays outside
        the subqueries, so they depend on its aggregate alone and MariaDB's subquery
        cache answers every row of a hot aggregate from one dive (20,000 rows behind a
        held chain: 20,008 index reads a claim, 32 ms).

        Not NOT EXISTS (an earlier row in status IN (0, 1, 3)): MariaDB reads a
        correlated subquery by ``ref``, with equalities only, so that probe sought on
        ``aggregate_id`` alone and walked every index entry of the aggregate, its done
        history included, to find none (650 entries a head at 150,000 pending and
        500,000 done rows over 1,000 aggregates). The index is named because the
        optimizer otherwise takes the claim index for a status it believes rare (the
        claimed rows, say), reading all of them, and sorting them, for each candidate.
        """
        q = self.ops.quote
        return join([
            (f"{alias}.{q('id')} <= COALESCE((SELECT e.{q('id')} FROM {self.ops.table} "
             f"AS e FORCE INDEX ({q(self.ops.name.aggregate_index)}) "
             f"WHERE e.{q('aggregate_id')} = {alias}.{q('aggregate_id')} "
             f"AND e.{q('status')} = {status} ORDER BY e.{q('id')} LIMIT 1), "
             f"{alias}.{q('id')})", [])
            for status in OPEN
        ], " AND ")


class MysqlDialect(Dialect):
    vendor = "mysql"
    ops_class = MysqlOps
    claim_class = MysqlClaim
    schema_class = MysqlSchema
    purge_class = MysqlPurge
    inbox_class = MysqlInbox
    closed_rows_class = MysqlClosedRows
