"""SQLite (3.35+, with the JSON functions): all of its SQL.

SQLite has no schemas and no INCLUDE; partial indexes exist. ``AUTOINCREMENT`` keeps ids
monotonic even after the newest rows are purged, which archives and replays rely on.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from string import Formatter
from typing import Any, ClassVar

from .base import Dialect
from .claim import ClaimRequest, ClaimSql
from .closed_rows import ClosedRowsSql, codes
from .features import Features
from .ops import SqlOps
from .purge import PurgeSql
from .schema import SchemaSql
from .sql import BUCKETS, IN_FLIGHT, LIMIT, MAX_CHAIN, Fragment, bind, compose, param
from .tables import OPEN_STATUSES_SQL, Check, Column, Table


class SqliteClosedRows(ClosedRowsSql):
    """The history pipeline's SQL on SQLite."""

    # Times are text here, written by the relay as strftime('%Y-%m-%d %H:%M:%f') and by
    # the ORM with six decimals or none; comparisons go through one spelling.
    def timestamp_sql(self, column: str, alias: str = "") -> str:
        qualified = f"{alias}.{self.ops.quote(column)}" if alias else self.ops.quote(column)
        return f"strftime('%Y-%m-%d %H:%M:%f', {qualified})"

    def timestamp_text_sql(self, column: str) -> str:
        return self.timestamp_sql(column)

    def utc_literal(self, value: dt.datetime) -> str:
        return f"'{self.archived_key_text(value)}'"

    def purge_archived_sql(self, statuses: Sequence[int]) -> str:
        q = self.ops.quote
        # With parameters, Django's cursor reads %-signs: strftime's are doubled.
        processed_at = self.timestamp_sql("processed_at", "o").replace("%", "%%")
        # CROSS JOIN fixes the order: each listed id is one primary-key lookup, instead
        # of a scan of the table probing the list.
        return (
            f"DELETE FROM {self.ops.table} WHERE {q('id')} IN (SELECT o.{q('id')} "
            f"FROM json_each(%s) AS a CROSS JOIN {self.ops.table} AS o "
            f"ON o.{q('id')} = json_extract(a.value, '$[0]') "
            f"WHERE {processed_at} = json_extract(a.value, '$[1]') "
            f"AND o.{q('status')} IN ({codes(statuses)}))"
        )


class SqliteSchema(SchemaSql):
    """The DDL of sqlite's tables."""

    # Relays there take turns, whole claims at a time (one writer): no bucket is read.
    indexes_buckets = False

    #: A check is two triggers (:meth:`add_check_statements`), which test the rows
    #: written, never those already there.
    checks_existing_rows = False

    COLUMN_TYPES: ClassVar[dict[str, str]] = {
        "id": "INTEGER NOT NULL",
        "text64": "VARCHAR(64)",
        "text255": "VARCHAR(255)",
        "text4000": "VARCHAR(4000)",
        "json": "TEXT",
        "text": "TEXT",
        "tinyint": "SMALLINT",
        "int": "INTEGER",
        "timestamp": "DATETIME",
    }

    DEFAULTS: ClassVar[dict[str, str]] = {
        "empty_json": "'{}'",
        "zero": "0",
        # The text form Django itself stores datetimes in, in UTC.
        "now": "(strftime('%Y-%m-%d %H:%M:%f', 'now'))",
    }

    def column_definition(self, table: Table, column: Column) -> str:
        definition = super().column_definition(table, column)
        if column.kind == "id":
            # AUTOINCREMENT is only allowed on the column itself.
            definition += (
                f" CONSTRAINT {self.ops.quote(table.name.primary_key)} PRIMARY KEY AUTOINCREMENT"
            )
        return definition

    def primary_key(self, table: Table) -> None:
        return None

    def json_check(self, column: str) -> str:
        return f"json_valid({self.ops.quote(column)})"

    def add_check_statements(self, table: Table, check: Check, reason: str) -> list[str]:
        """SQLite cannot add a constraint to a table: triggers named after ``check``
        refuse, with ``reason``, the inserts and updates it would refuse (its
        expression false, not NULL, as a CHECK's)."""
        q = self.ops.quote
        message = f"{check.name}: {reason}".replace("'", "''")
        refused = f"NOT ({self.check_expression(table, check, row='NEW.')})"
        return [
            f"CREATE TRIGGER IF NOT EXISTS {q(name)}\n"
            f"BEFORE {event} ON {self.qualified(table)} FOR EACH ROW WHEN {refused}\n"
            f"BEGIN\n    SELECT RAISE(ABORT, '{message}');\nEND"
            for name, event in self._check_triggers(check)
        ]

    def drop_check_statements(self, table: Table, check: Check) -> list[str]:
        return [f"DROP TRIGGER IF EXISTS {self.ops.quote(name)}"
                for name, _ in self._check_triggers(check)]

    def _check_triggers(self, check: Check) -> list[tuple[str, str]]:
        """Each trigger of ``check``: its name and the writes it fires on (the updates of
        the columns the check reads)."""
        read = [field for _, field, _, _ in Formatter().parse(check.expression) if field]
        return [(f"{check.name}_insert", "INSERT"),
                (f"{check.name}_update", f"UPDATE OF {self.ops.columns(read)}")]


class SqlitePurge(PurgeSql):
    purge_subquery_tail = 'ORDER BY "id" LIMIT %s'


class SqliteOps(SqlOps):
    vendor = "sqlite"
    now_sql = "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')"

    def now_plus_sql(self) -> str:
        return "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', %s)"

    def offset_param(self, milliseconds: int) -> Any:
        return f"{milliseconds / 1000:+.3f} seconds"

    def is_transient(self, exc: BaseException) -> bool:
        # Another connection held the write lock longer than the busy timeout.
        return "database is locked" in str(exc)


class SqliteFeatures(Features):
    # One writer: relays there take turns, whole claims at a time, and do not share the
    # aggregates out.
    shares_aggregates = False


class SqliteClaim(ClaimSql):
    """The claim as one SELECT in the caller's transaction. SQLite has one writer at a
    time, so its relays do not share the aggregates out: one holds every bucket and
    reads them oldest first, the others wait as standbys. A claim of some buckets reads
    their rows only all the same (a relay that holds a few, as a handover leaves it).

    ``heads`` exists to keep a scan for heads short on a deep backlog; this claim ranks
    every open row (one writer, one relay), so capping the heads would only hand out
    fewer rows for the same reading."""

    def run(self, cursor: Any, request: ClaimRequest, in_flight: Sequence[str] = ()
            ) -> list[tuple[Any, ...]]:
        by_bucket = request.buckets is not None
        sql, params = (self.chain_claim_sql(by_bucket) if request.max_chain > 1
                       else self.claim_sql(by_bucket))
        cursor.execute(sql, bind(params, **self.slots(request, in_flight)))
        return list(cursor.fetchall())

    def statements(self) -> dict[str, Fragment]:
        return {"claim": self.claim_sql(), "claim_by_bucket": self.claim_sql(True),
                "chain_claim": self.chain_claim_sql(),
                "chain_claim_by_bucket": self.chain_claim_sql(True)}

    def claim_sql(self, by_bucket: bool = False) -> Fragment:
        """Heads only (``MAX_CHAIN`` 1): the first :data:`~.sql.LIMIT` claimable heads,
        the aggregates in flight passed over (:meth:`in_flight_sql`); ``by_bucket``: of
        the buckets in :data:`~.sql.BUCKETS` only."""
        q = self.ops.quote
        return self.ops.statement(("claim", by_bucket), lambda: self.picked_sql(compose(
            f"SELECT c.{q('id')} FROM {self.ops.table} AS c WHERE {{}}{{}}{{}} AND {{}} "
            f"ORDER BY c.{q('id')} LIMIT {{}}",
            self.claimable_status_sql("c"), self.in_flight_sql("c"),
            self.in_buckets_sql(f"c.{q('bucket')}") if by_bucket else ("", []),
            self.head_of_aggregate_sql("c"), param(LIMIT))))

    def chain_claim_sql(self, by_bucket: bool = False) -> Fragment:
        """With chains: the first :data:`~.sql.LIMIT` rows within ``MAX_CHAIN`` of their
        aggregate's head and unbroken (see :meth:`ranked_open_rows_sql`); ``by_bucket``:
        of the aggregates whose head is in the buckets in :data:`~.sql.BUCKETS` (a chain
        follows its head, as on the other vendors)."""
        q = self.ops.quote
        return self.ops.statement(("chain_claim", by_bucket), lambda: self.picked_sql(compose(
            f"SELECT r.{q('id')} FROM ({{}}) AS r WHERE r.position <= {{}} "
            f"AND r.unbroken = 1{{}} ORDER BY r.{q('id')} LIMIT {{}}",
            self.ranked_open_rows_sql(), param(MAX_CHAIN),
            self.in_buckets_sql("r.head_bucket") if by_bucket else ("", []), param(LIMIT))))

    def picked_sql(self, picked: Fragment) -> Fragment:
        """The rows whose ids ``picked`` selects, as the claim hands them out."""
        q = self.ops.quote
        return compose(f"SELECT {self.returned_columns()} FROM {self.ops.table} AS o "
                       f"WHERE o.{q('id')} IN ({{}}) ORDER BY o.{q('id')}", picked)

    def in_flight_sql(self, alias: str) -> Fragment:
        """`` AND`` the row's aggregate has no rows in flight, the aggregates bound as
        one JSON array."""
        return compose(f" AND {alias}.{self.ops.quote('aggregate_id')} NOT IN "
                       "(SELECT value FROM json_each({}))", param(IN_FLIGHT))

    def in_buckets_sql(self, bucket: str) -> Fragment:
        """`` AND`` ``bucket`` is one of the claim's, bound as one JSON array (a row
        without a bucket is none of them)."""
        return compose(f" AND {bucket} IN (SELECT value FROM json_each({{}}))",
                       param(BUCKETS))

    def buckets_param(self, buckets: Sequence[int]) -> Any:
        return json.dumps(list(buckets))

    def in_flight_param(self, aggregates: Sequence[str]) -> Any:
        return json.dumps(list(aggregates))

    def ranked_open_rows_sql(self) -> Fragment:
        """Every open row of the aggregates not in flight with its place among its
        aggregate's open rows (1: the head), its head's bucket, and whether it and all
        before it are claimable by their own state. With one writer at a time no
        competitor can change a row mid-claim, so the contract's chain is exactly
        "position within MAX_CHAIN and unbroken". Reads every open row, in the open-rows
        index's order: fine for SQLite's single relay."""
        q = self.ops.quote
        window = f"PARTITION BY c.{q('aggregate_id')} ORDER BY c.{q('id')}"
        return compose(f"SELECT c.{q('id')}, ROW_NUMBER() OVER ({window}) AS position, "
                       f"FIRST_VALUE(c.{q('bucket')}) OVER ({window}) AS head_bucket, "
                       f"{{}} AS unbroken FROM {self.ops.table} AS c "
                       f"WHERE c.{q('status')} IN {OPEN_STATUSES_SQL}{{}}",
                       self.unbroken_sql("c", window), self.in_flight_sql("c"))


class SqliteDialect(Dialect):
    vendor = "sqlite"
    ops_class = SqliteOps
    claim_class = SqliteClaim
    features_class = SqliteFeatures
    schema_class = SqliteSchema
    purge_class = SqlitePurge
    closed_rows_class = SqliteClosedRows
