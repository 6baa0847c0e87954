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
from collections.abc import Sequence
from typing import Any, ClassVar

from ..naming import TableName
from .base import Dialect
from .closed_rows import ClosedRowsSql, codes
from .features import Features
from .inbox_sql import InboxSql
from .purge import PurgeSql
from .schema import SchemaSql
from .sql import Fragment, Partition, bind, chain_share, compose, join, param
from .tables import INBOX_KEY, OPEN_STATUSES, Column, Index, Table


class MysqlClosedRows(ClosedRowsSql):
    """The history pipeline's SQL on MariaDB/MySQL."""

    def utc_literal(self, value: dt.datetime) -> str:
        return f"CAST('{self.archived_key_text(value)}' AS DATETIME(3))"

    def timestamp_text_sql(self, column: str) -> str:
        return f"DATE_FORMAT({self.quote(column)}, '%Y-%m-%d %H:%i:%s.%f')"

    def purge_archived_sql(self, statuses: Sequence[int]) -> str:
        q = self.quote
        return (
            f"DELETE o FROM {self.table} AS o JOIN JSON_TABLE(%s, '$[*]' COLUMNS ("
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
        return f"JSON_VALID({self.quote(column)})"

    @staticmethod
    def schema_expression(name: TableName) -> str:
        return f"'{name.schema}'" if name.schema else "DATABASE()"

    def table_options(self, table: Table) -> str:
        # Binary collation: message and aggregate ids compare exactly, as elsewhere.
        return " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"

    def create_index_statements(self, index: Index, table: Table) -> list[str]:
        return self._if_index(index, table, exists=False,
                              then=f"CREATE INDEX {self.index_definition(index, table)}")

    def drop_index_statements(self, index: Index, table: Table) -> list[str]:
        drop = f"DROP INDEX {self.quote(index.name)} ON {self.qualified(table)}"
        return self._if_index(index, table, exists=True, then=drop)

    def _if_index(self, index: Index, table: Table, *, exists: bool, then: str) -> list[str]:
        """Run ``then`` only if ``index`` exists (or, with ``exists`` False, is missing)."""
        return self._if_found("statistics", f"index_name = '{index.name}'", table,
                              exists=exists, then=then)

    # MariaDB has ADD/DROP COLUMN IF [NOT] EXISTS, MySQL does not: the catalog decides.
    def add_column_statements(self, column: Column, table: Table) -> list[str]:
        then = (f"ALTER TABLE {self.qualified(table)} "
                f"ADD COLUMN {self.column_definition(table, column)}")
        return self._if_found("columns", f"column_name = '{column.name}'", table,
                              exists=False, then=then)

    def drop_column_statements(self, column: Column, table: Table) -> list[str]:
        then = f"ALTER TABLE {self.qualified(table)} DROP COLUMN {self.quote(column.name)}"
        return self._if_found("columns", f"column_name = '{column.name}'", table,
                              exists=True, then=then)

    def _if_found(self, catalog: str, condition: str, table: Table, *, exists: bool,
                  then: str) -> list[str]:
        """Run ``then`` only if ``information_schema.<catalog>`` has a row of ``table``
        meeting ``condition`` (or, with ``exists`` False, has none)."""
        return [
            f"SET @eventferry_ddl = (SELECT IF(COUNT(*) {'>' if exists else '='} 0, "
            f"'{then}', 'DO 0') FROM information_schema.{catalog} "
            f"WHERE table_schema = {self.schema_expression(table.name)} "
            f"AND table_name = '{table.name.table}' AND {condition})",
            "PREPARE eventferry_ddl FROM @eventferry_ddl",
            "EXECUTE eventferry_ddl",
            "DEALLOCATE PREPARE eventferry_ddl",
        ]


class MysqlFeatures(Features):
    claim_needs_transaction = True


class MysqlPurge(PurgeSql):
    """Batch deletes on MariaDB/MySQL: a DELETE with its own ORDER BY and LIMIT."""

    def delete_batch(
        self, cursor: Any, table: str, condition: str, params: Sequence[Any], limit: int,
        order: Sequence[str] = ("id",),
    ) -> int:
        """``order`` makes the LIMIT deterministic (safe to replicate by statement); it
        should be the order of the index that serves ``condition``, so the scan stops at
        the limit instead of sorting every matching row for each batch."""
        columns = ", ".join(self.quote(column) for column in order)
        cursor.execute(
            f"DELETE FROM {table} WHERE {condition} ORDER BY {columns} LIMIT %s",
            [*params, limit],
        )
        return int(cursor.rowcount)

    def purge_batch(
        self, cursor: Any, statuses: Sequence[int], cutoff: Any, limit: int
    ) -> int:
        # The retention index (status, processed_at), whose entries end with the primary
        # key: ORDER BY id alone made each batch sort every old row (1,200 rows/s for a
        # 300,000-row backlog of done rows, found by benchmarks/scale.py).
        return self.delete_batch(cursor, self.table, self.purge_condition(statuses), [cutoff],
                                 limit, order=("status", "processed_at", "id"))


class MysqlInbox(InboxSql):
    def record_message_sql(self, table: Table) -> str:
        # No ON CONFLICT here. IGNORE turns only the duplicate key into "0 rows": the
        # values are validated before they get here, so there is nothing else for it to
        # hide. (ON DUPLICATE KEY UPDATE would report 1 row either way: Django connects
        # with CLIENT_FOUND_ROWS.)
        return (f"INSERT IGNORE INTO {self.qualified(table)} ({self.columns(INBOX_KEY)}) "
                "VALUES (%s, %s)")


class MysqlDialect(Dialect):
    vendor = "mysql"
    features_class = MysqlFeatures
    schema_class = MysqlSchema
    purge_class = MysqlPurge
    inbox_class = MysqlInbox
    closed_rows_class = MysqlClosedRows

    # -- DML ---------------------------------------------------------------------------
    now_sql = "UTC_TIMESTAMP(3)"
    # MySQL evaluates SET assignments left to right with the new values, so the claim's
    # SET must read the old status first: claim_set_sql() puts attempts before status.
    qualify_set_columns = True
    skip_locked_sql = " FOR UPDATE SKIP LOCKED"
    # Fresh rows in id order alone: MariaDB does not count ``next_retry_at IS NULL`` as a
    # constant of the claim index's prefix, so the index's full order made it sort every
    # fresh row, each probed as a head first (4 s a claim at 150,000 pending rows), and
    # lock every head found, not only those it returned.
    fresh_order = ("id",)

    def is_transient(self, exc: BaseException) -> bool:
        # 1213: deadlock victim; 1205: lock wait timeout. InnoDB rolls the transaction back.
        return bool(exc.args) and exc.args[0] in (1213, 1205)

    def now_plus_sql(self) -> str:
        return "TIMESTAMPADD(MICROSECOND, %s, UTC_TIMESTAMP(3))"

    def offset_param(self, milliseconds: int) -> Any:
        return milliseconds * 1000

    def aggregate_hash_sql(self, alias: str) -> str:
        return f"CRC32({alias}.{self.quote('aggregate_id')})"

    def claim(self, cursor: Any, limit: int, lease_timeout_ms: int, max_chain: int = 1,
              heads: int | None = None, partition: Partition | None = None,
              expired_leases: bool = True) -> list[tuple[Any, ...]]:
        # No UPDATE ... RETURNING here: lock, update, read back, inside the caller's
        # transaction. A locking clause does not reach into the NOT EXISTS subquery, which
        # reads committed state, so a competitor's locked earlier row still blocks. Fresh
        # rows are read in the claim index's order (id order for them), so the scan stops
        # at the limit; the few overdue rows are found separately.
        q = self.quote
        lease_offset = self.offset_param(-lease_timeout_ms)
        most = limit if max_chain == 1 else min(limit, heads or limit)
        found: list[tuple[Any, ...]] = []
        parts = partition._asdict() if partition else {}
        for sql, params in (self.fresh_candidates_sql(partition is not None),
                            self.overdue_candidates_sql(expired_leases)):
            cursor.execute(sql, bind(params, heads=most, lease_offset=lease_offset, **parts))
            found += cursor.fetchall()
        found = sorted(found)[:most]
        still = set(self.still_heads(cursor, [row[0] for row in found]))
        found = [row for row in found if row[0] in still]
        if not found:
            return []
        ids = [row[0] for row in found]
        share = chain_share(max_chain, limit, len(found))
        if share:
            ids = sorted(ids + self.chains(cursor, dict((a, i) for i, a in found),
                                           lease_offset, share))[:limit]
        condition, params = self.ids_condition(ids)
        cursor.execute(
            f"UPDATE {self.table} AS o SET {self.claim_set_sql('o')} WHERE o.{condition}", params
        )
        cursor.execute(
            f"SELECT {self.returned_columns()} FROM {self.table} AS o WHERE o.{condition} "
            f"ORDER BY o.{q('id')}",
            params,
        )
        return list(cursor.fetchall())

    def chains(self, cursor: Any, heads: dict[str, int], lease_offset: Any, share: int
               ) -> list[int]:
        """Ids of the rows behind ``heads`` (aggregate -> head id, all locked by this
        transaction) that chain onto them: each aggregate's next ``share`` open rows in
        id order (see :func:`~.sql.chain_share`), stopping at the first that is not
        claimable by its own state. Competitors cannot chain these aggregates: they skip
        the locked heads, and a row behind an open row is never a head.

        No LATERAL here, and the open-rows index is ordered by status before id, so
        "the next open rows in id order" is read as one index range per open status and
        head, each in id order and cut at ``share`` (a UNION ALL of them, in one round
        trip), and merged here: a claim reads at most three times what it hands out,
        however deep the aggregates' backlogs are.
        """
        q = self.quote
        template = (f"(SELECT c.{q('id')}, c.{q('aggregate_id')}, CASE WHEN {{}} THEN 1 "
                    f"ELSE 0 END FROM {self.table} AS c WHERE c.{q('aggregate_id')} = {{}} "
                    f"AND c.{q('status')} = {{}} AND c.{q('id')} > {{}} "
                    f"ORDER BY c.{q('id')} LIMIT {{}})")
        own_state = self.claimable_status_sql("c")
        sql, params = join([
            compose(template, own_state, param(aggregate), param(status), param(head),
                    param(share))
            for aggregate, head in heads.items() for status in OPEN_STATUSES
        ], " UNION ALL ")
        cursor.execute(sql, bind(params, lease_offset=lease_offset))
        rows: dict[str, list[tuple[int, int]]] = {}
        for row_id, aggregate, claimable in cursor.fetchall():
            rows.setdefault(aggregate, []).append((row_id, claimable))
        chained = []
        for following in rows.values():
            for row_id, claimable in sorted(following)[:share]:
                if not claimable:
                    break
                chained.append(row_id)
        return chained

    def still_heads(self, cursor: Any, ids: list[int]) -> list[int]:
        """The candidates no earlier open row of their aggregate holds back, judged
        again in a statement of its own.

        The candidate scans' locking read sees rows committed while it runs, but their
        head probe reads the snapshot taken when the statement began: the later events
        of a writer that committed mid-scan passed as heads while its first one was
        skipped as locked, and went out before it (the soak found this on MariaDB).
        Under READ COMMITTED, Django's default for MySQL, this statement's snapshot has
        that commit. A plain read: a locking one here made relays queue on each other's
        rows. Earlier rows among the candidates themselves do not count.
        """
        if not ids:
            return ids
        q = self.quote
        condition, params = self.ids_condition(ids)
        sql, params = compose(f"SELECT c.{q('id')} FROM {self.table} AS c WHERE c.{{}} AND {{}}",
                              (condition, params),
                              self.head_of_aggregate_sql("c", ignoring=(f"NOT e.{condition}",
                                                                        params)))
        cursor.execute(sql, params)
        heads = {row[0] for row in cursor.fetchall()}
        return [row_id for row_id in ids if row_id in heads]

    def head_of_aggregate_sql(self, alias: str = "c", ignoring: Fragment | None = None
                              ) -> Fragment:
        """No earlier row of the same aggregate is open, asked per open status as "the
        aggregate's first row in that status is not before this one": three index dives,
        each reading one entry of the open-rows index (``ignoring``, a condition on
        ``e``, skips rows that do not count). The candidate's id stays outside the
        subqueries, so they depend on its aggregate alone and MariaDB's subquery cache
        answers every row of a hot aggregate from one dive (20,000 rows behind a held
        chain: 20,008 index reads a claim, 32 ms).

        Not NOT EXISTS (an earlier row in status IN (0, 1, 3)): MariaDB reads a
        correlated subquery by ``ref``, with equalities only, so that probe sought on
        ``aggregate_id`` alone and walked every index entry of the aggregate, its done
        history included, to find none (650 entries a head at 150,000 pending and
        500,000 done rows over 1,000 aggregates). The index is named because the
        optimizer otherwise takes the claim index for a status it believes rare (the
        claimed rows, say), reading all of them, and sorting them, for each candidate.
        """
        q = self.quote
        rest = compose(" AND {}", ignoring) if ignoring else ("", [])
        return join([
            compose(f"{alias}.{q('id')} <= COALESCE((SELECT e.{q('id')} FROM {self.table} "
                    f"AS e FORCE INDEX ({q(self.name.aggregate_index)}) "
                    f"WHERE e.{q('aggregate_id')} = {alias}.{q('aggregate_id')} "
                    f"AND e.{q('status')} = {status}{{}} ORDER BY e.{q('id')} LIMIT 1), "
                    f"{alias}.{q('id')})", rest)
            for status in OPEN_STATUSES
        ], " AND ")
