"""SQL Server (2016 SP1+, Azure SQL Database, Managed Instance): the dialect and its
parts but the DDL (``microsoft_schema.py``) and the reading of its errors
(``microsoft_errors.py``).

The claim is one batch that commits or rolls back its own transaction; rows other claims
hold are skipped with READPAST, which under RCSI needs READCOMMITTEDLOCK beside it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

from .base import Dialect
from .closed_rows import ClosedRowSelection, ClosedRowsSql, codes
from .features import Features
from .inbox_sql import InboxSql
from .inserts import InsertSql
from .limits import SQL_SERVER_DELETE_ROWS
from .microsoft_errors import DEADLOCK_VICTIM, SERIALIZATION_FAILURE, native_errors, sqlstate
from .microsoft_schema import MicrosoftSchema
from .purge import PurgeSql
from .settlement_sql import SettlementSql
from .sql import (
    HEADS,
    LIMIT,
    PART,
    PARTS,
    Fragment,
    Partition,
    bind,
    chain_share_sql,
    compose,
    join,
    param,
)
from .tables import (
    CLAIM_COLUMNS,
    INBOX_KEY,
    JSON_COLUMNS,
    MIGRATED_COLUMNS,
    OPEN_STATUSES_SQL,
    Column,
    Table,
)

#: A scheduled delay is bound as days and milliseconds (see MicrosoftInserts.delay_sql).
MILLISECONDS_A_DAY = 86_400_000

#: The claim's candidate scan: rows other claims hold are skipped (READPAST), the rows
#: taken are held until commit (UPDLOCK), with locking semantics under RCSI too
#: (READCOMMITTEDLOCK); see :attr:`MicrosoftDialect.probe_hint` for the head probe.
_CANDIDATE_HINTS = "WITH (READCOMMITTEDLOCK, READPAST, UPDLOCK, ROWLOCK)"


class MicrosoftClosedRows(ClosedRowsSql):
    """The history pipeline's SQL on SQL Server."""

    # An id range holds at most as many rows as ids: one range, one DELETE under the
    # lock escalation threshold.
    max_purge_range_ids = SQL_SERVER_DELETE_ROWS

    def utc_literal(self, value: dt.datetime) -> str:
        return f"CAST('{self.archived_key_text(value)}' AS DATETIME2(3))"

    def archived_key_text(self, value: dt.datetime) -> str:
        # ISO 8601 with a T reads the same whatever the session's DATEFORMAT/language.
        return super().archived_key_text(value).replace(" ", "T")

    def timestamp_text_sql(self, column: str) -> str:
        # Style 121: yyyy-mm-dd hh:mi:ss.mmm; jTDS has no DATETIME2 type of its own.
        return f"CONVERT(VARCHAR(23), {self.quote(column)}, 121)"

    def archive_column_sql(self, column: str) -> str:
        if column in JSON_COLUMNS and self.native_json:
            return f"CAST({self.quote(column)} AS NVARCHAR(MAX)) AS {self.quote(column)}"
        return super().archive_column_sql(column)

    def sum_sql(self, expression: str) -> str:
        # SUM of a BIGINT is a BIGINT on SQL Server, which a large archive can overflow.
        return f"SUM(CAST({expression} AS DECIMAL(38, 0)))"

    def purge_archived_sql(self, statuses: Sequence[int]) -> str:
        """Row locks keep the relay's rows free while a batch goes. No READPAST: a row held
        by another transaction (a redrive) is waited for and then re-checked, so it is
        deleted only if it is still closed with the archived processed_at. READCOMMITTEDLOCK
        makes that check read the committed row under RCSI too.
        """
        q = self.quote
        return (
            f"DELETE o FROM {self.table} AS o WITH (ROWLOCK, READCOMMITTEDLOCK) "
            f"JOIN OPENJSON(%s) WITH ({q('id')} BIGINT '$[0]', "
            f"{q('processed_at')} DATETIME2(3) '$[1]') AS a "
            f"ON a.{q('id')} = o.{q('id')} AND a.{q('processed_at')} = o.{q('processed_at')} "
            f"WHERE o.{q('status')} IN ({codes(statuses)})"
        )


    def purge_selection_sql(self, selection: ClosedRowSelection) -> str:
        # Row locks, and the committed rows read, as purge_archived_sql says.
        return (f"DELETE FROM {self.table} WITH (ROWLOCK, READCOMMITTEDLOCK) "
                f"WHERE {self.selection_condition(selection)}")


def _claimed_type(column: Column) -> str:
    """How the claim's table variable declares ``column``: the table's own type, JSON
    as NVARCHAR(MAX) either way, and NOT NULL for the lease token too (a claimed row
    always has one: the outbox's claimed-at check)."""
    if column.kind == "id":
        return "BIGINT NOT NULL PRIMARY KEY"
    nullable = column.nullable and column.name != "claimed_at"
    return f"{MicrosoftSchema.COLUMN_TYPES[column.kind]} {'NULL' if nullable else 'NOT NULL'}"


#: Types of the claim's table variable, from the contract's columns.
_CLAIMED_TYPES = {c.name: _claimed_type(c) for c in MIGRATED_COLUMNS if c.name in CLAIM_COLUMNS}


class MicrosoftFeatures(Features):
    @property
    def json_documents_only(self) -> bool:  # type: ignore[override]
        # ISJSON without a type argument (2016+; the argument needs 2022) is 1 only for
        # an object or an array.
        return not self.native_json

    # The claim batch commits or rolls back its own transaction (XACT_ABORT, TRY/CATCH),
    # so it is never nested inside another one.
    claim_joins_transaction = False


class MicrosoftInserts(InsertSql):
    def delay_sql(self) -> str:
        # Days and the milliseconds left over: DATEADD takes an INT, and a delay of
        # milliseconds alone would overflow at ~24.8 days.
        return ("DATEADD(MILLISECOND, CAST(%s AS INT), "
                "DATEADD(DAY, CAST(%s AS INT), SYSUTCDATETIME()))")

    def delay_params(self, milliseconds: int | None) -> list[Any]:
        if milliseconds is None:
            return [None, None]
        days, rest = divmod(milliseconds, MILLISECONDS_A_DAY)
        return [rest, days]


class MicrosoftSettlement(SettlementSql):
    # READPAST stands in for SKIP LOCKED: a renewal never waits on a locked row (see
    # SettlementSql.renew); under RCSI SQL Server takes READPAST only with
    # READCOMMITTEDLOCK.
    renew_hint = " WITH (READCOMMITTEDLOCK, READPAST, ROWLOCK)"


class MicrosoftPurge(PurgeSql):
    """Batch deletes on SQL Server: DELETE TOP, below lock escalation."""

    def delete_batch(
        self, cursor: Any, table: str, condition: str, params: Sequence[Any], limit: int
    ) -> int:
        # READPAST: a row locked by anyone is left for the next purge, never waited on.
        # Under READ_COMMITTED_SNAPSHOT (the Azure SQL default) SQL Server refuses READPAST
        # at READ COMMITTED unless READCOMMITTEDLOCK comes with it, as in the claim.
        cursor.execute(
            f"DELETE TOP (%s) FROM {table} WITH (READCOMMITTEDLOCK, READPAST, ROWLOCK) "
            f"WHERE {condition}",
            [limit, *params],
        )
        return int(cursor.rowcount)

    max_delete_batch = SQL_SERVER_DELETE_ROWS


class MicrosoftInbox(InboxSql):
    def record_message_sql(self, table: Table) -> str:
        """Parameters: consumer, message id, consumer, message id.

        UPDLOCK and HOLDLOCK make the existence probe and the insert one step: the probe
        takes a key-range lock on the (consumer, message id) key, so a concurrent
        delivery of the same message waits for this transaction instead of both seeing
        "absent" (which would leave one of them with a duplicate-key error). The lock is
        taken with locking semantics under RCSI too.
        """
        q = self.quote
        qualified = self.qualified(table)
        return (
            f"INSERT INTO {qualified} ({self.columns(INBOX_KEY)})\n"
            "    SELECT %s, %s\n"
            f"    WHERE NOT EXISTS (SELECT 1 FROM {qualified} WITH (UPDLOCK, HOLDLOCK)\n"
            f"        WHERE {q('consumer')} = %s AND {q('message_id')} = %s)"
        )

    def record_message_params(self, consumer: str, message_id: str) -> list[Any]:
        return [consumer, message_id, consumer, message_id]


class MicrosoftDialect(Dialect):
    vendor = "microsoft"
    features_class = MicrosoftFeatures
    schema_class = MicrosoftSchema
    inserts_class = MicrosoftInserts
    settlement_class = MicrosoftSettlement
    purge_class = MicrosoftPurge
    inbox_class = MicrosoftInbox
    closed_rows_class = MicrosoftClosedRows

    # -- DML ---------------------------------------------------------------------------
    now_sql = "SYSUTCDATETIME()"
    first_row = ("TOP (1) ", "")
    qualify_set_columns = True
    # No READPAST on the probe: skipping a competitor's locked earlier row would let a
    # later row of the same aggregate out first. READCOMMITTEDLOCK keeps locking
    # semantics under RCSI (the Azure SQL default), where plain reads would not block.
    probe_hint = " WITH (READCOMMITTEDLOCK)"

    # Times are bound at the column's precision: a DATETIME2(7) parameter would compare
    # unequal to a lease it should match, and a millisecond DATEADD overflows at ~24.8 days.
    timestamp_placeholder = "CAST(%s AS DATETIME2(3))"

    def now_plus_sql(self) -> str:
        return "DATEADD(MILLISECOND, %s, SYSUTCDATETIME())"

    def ids_condition(self, ids: Sequence[int]) -> tuple[str, list[Any]]:
        # One parameter however many ids: SQL Server allows 2,100 parameters at most.
        return (
            f"{self.quote('id')} IN (SELECT [id] FROM OPENJSON(%s) WITH ([id] BIGINT '$'))",
            [json.dumps([int(i) for i in ids])],
        )

    def claim_declare_sql(self, chained: bool = False) -> str:
        q = self.quote
        declared = ",\n    ".join(f"{q(c)} {_CLAIMED_TYPES[c]}" for c in CLAIM_COLUMNS)
        sql = f"DECLARE @claimed TABLE (\n    {declared}\n)"
        if chained:
            sql += (f";\nDECLARE @heads TABLE (\n    {q('id')} {_CLAIMED_TYPES['id']},\n"
                    f"    {q('aggregate_id')} {_CLAIMED_TYPES['aggregate_id']}\n);\n"
                    "DECLARE @share INT")
        return sql

    def aggregate_hash_sql(self, alias: str) -> str:
        # CHECKSUM: deterministic for a value under one collation; widened before ABS(),
        # which would overflow on the smallest INT.
        return f"ABS(CAST(CHECKSUM({alias}.{self.quote('aggregate_id')}) AS BIGINT))"

    def partition_sql(self, alias: str = "c") -> Fragment:
        # T-SQL has no MOD(), and a literal % would meet the driver's %-formatting.
        hashed = self.aggregate_hash_sql(alias)
        return compose(f"{hashed} - {hashed} / {{}} * {{}} = {{}}",
                       param(PARTS), param(PARTS), param(PART))

    def claim_update_sql(self, partitioned: bool = False) -> Fragment:
        """The claim without chains: the first :data:`~.sql.LIMIT` claimable heads.

        Written as UPDATE ... FROM a derived table rather than a CTE: the same plan on SQL
        Server, and Babelfish rejects a CTE followed by UPDATE ... OUTPUT INTO. OUTPUT
        goes INTO a table variable because a bare OUTPUT fails once the table has a trigger.
        """
        return self.claim_picked_sql(compose(
            f"SELECT TOP ({{}}) c.{self.quote('id')}\n"
            f"        FROM {self.table} AS c {_CANDIDATE_HINTS}\n"
            "        WHERE {}\n"
            f"        ORDER BY c.{self.quote('id')}",
            param(LIMIT), self.claimable_sql("c", partitioned),
        ))

    def claim_picked_sql(self, picked: Fragment) -> Fragment:
        """Claim the rows whose ids ``picked`` selects, into ``@claimed``."""
        q = self.quote
        output = ", ".join(f"inserted.{q(c)}" for c in CLAIM_COLUMNS)
        return compose(
            f"UPDATE o SET {self.claim_set_sql('o')}\n"
            f"    OUTPUT {output} INTO @claimed\n"
            f"    FROM {self.table} AS o\n"
            "    JOIN (\n"
            "        {}\n"
            f"    ) AS picked ON picked.{q('id')} = o.{q('id')}\n"
            "    OPTION (MAXDOP 1)",
            picked,
        )

    def claim_heads_sql(self, partitioned: bool = False) -> Fragment:
        """The chained claim's first step: lock the first :data:`~.sql.HEADS` heads.

        The candidate scan READPASTs rows other claims hold, but the head probe does not
        (see :attr:`probe_hint`), so a row counts as a head only if no earlier open row of
        its aggregate exists, locked or not. The UPDLOCK on each head stays until commit:
        a competitor's scan skips it, so only this claim reads the chain behind it.
        """
        q = self.quote
        return compose(
            f"INSERT INTO @heads ({q('id')}, {q('aggregate_id')})\n"
            f"        SELECT TOP ({{}}) c.{q('id')}, c.{q('aggregate_id')}\n"
            f"        FROM {self.table} AS c {_CANDIDATE_HINTS}\n"
            "        WHERE {}\n"
            f"        ORDER BY c.{q('id')}\n"
            "        OPTION (MAXDOP 1)",
            param(HEADS), self.claimable_sql("c", partitioned),
        )

    def claim_share_sql(self) -> Fragment:
        """How many rows may follow each head (:func:`~.sql.chain_share_sql`)."""
        return compose("SELECT @share = {} FROM @heads",
                       chain_share_sql("COUNT(*)", least=False))

    def claim_chains_sql(self) -> Fragment:
        """The chained claim's second step: the heads and the rows chained behind them,
        the first :data:`~.sql.LIMIT` of them in id order, each chain no longer than its
        share (``@share``, see :meth:`claim_share_sql`).

        Each chain walks its aggregate's next open rows in id order (the open-rows
        index) and stops at the first that is not claimable by its own state. That walk
        has no READPAST: skipping a locked row there would let a row behind it out
        first. It waits for the lock instead and reads the row's committed state.
        READCOMMITTEDLOCK keeps that true under RCSI; UPDLOCK holds the chain's rows
        from the read to the update.
        """
        q = self.quote
        window = f"ORDER BY c.{q('id')} ROWS UNBOUNDED PRECEDING"
        return self.claim_picked_sql(compose(
            f"SELECT TOP ({{}}) x.{q('id')} FROM (\n"
            f"            SELECT h.{q('id')} FROM @heads AS h\n"
            "            UNION ALL\n"
            f"            SELECT r.{q('id')} FROM @heads AS h CROSS APPLY (\n"
            f"                SELECT TOP (@share) c.{q('id')}, {{}} AS unbroken\n"
            f"                FROM {self.table} AS c WITH (READCOMMITTEDLOCK, UPDLOCK, ROWLOCK)\n"
            f"                WHERE c.{q('aggregate_id')} = h.{q('aggregate_id')} "
            f"AND c.{q('status')} IN {OPEN_STATUSES_SQL} AND c.{q('id')} > h.{q('id')}\n"
            f"                ORDER BY c.{q('id')}\n"
            "            ) AS r WHERE r.unbroken = 1\n"
            f"        ) AS x ORDER BY x.{q('id')}",
            param(LIMIT), self.unbroken_sql("c", window),
        ))

    def claim_result_sql(self) -> str:
        return f"SELECT {self.columns(CLAIM_COLUMNS)} FROM @claimed ORDER BY {self.quote('id')}"

    def claim_sql(self, chained: bool = False, partitioned: bool = False) -> Fragment:
        """The whole claim as one batch with its own transaction: XACT_ABORT plus
        TRY/CATCH, so any error rolls the claim back before it is re-raised. ``chained``:
        with chains (two steps, see :meth:`claim_heads_sql`).

        SQL Server restores NOCOUNT and XACT_ABORT when a parameterized batch returns;
        a driver sending this as a plain batch would not, so the batch turns both off
        on its way out, after the result or before re-raising an error."""
        steps = (join([self.claim_heads_sql(partitioned), self.claim_share_sql(),
                       self.claim_chains_sql()], ";\n    ") if chained
                 else self.claim_update_sql(partitioned))
        return self.statement(("claim", chained, partitioned), lambda: compose(
            "SET NOCOUNT ON;\n"
            "SET XACT_ABORT ON;\n"
            f"{self.claim_declare_sql(chained)};\n"
            "BEGIN TRY\n"
            "    BEGIN TRANSACTION;\n"
            "    {};\n"
            "    COMMIT TRANSACTION;\n"
            "END TRY\n"
            "BEGIN CATCH\n"
            "    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;\n"
            "    SET NOCOUNT OFF;\n"
            "    SET XACT_ABORT OFF;\n"
            "    THROW;\n"
            "END CATCH;\n"
            f"{self.claim_result_sql()};\n"
            "SET NOCOUNT OFF;\n"
            "SET XACT_ABORT OFF;",
            steps,
        ))

    def claim(self, cursor: Any, limit: int, lease_timeout_ms: int, max_chain: int = 1,
              heads: int | None = None, partition: Partition | None = None,
              expired_leases: bool = True) -> list[tuple[Any, ...]]:
        # Expired leases are always looked for: one candidate scan tests each row it
        # reads for every claimable state, so leaving leases out would save no reading.
        sql, params = self.claim_sql(chained=max_chain > 1, partitioned=partition is not None)
        cursor.execute(sql, bind(params, limit=limit, heads=min(limit, heads or limit),
                                 max_chain=max_chain,
                                 lease_offset=self.offset_param(-lease_timeout_ms),
                                 **(partition._asdict() if partition else {})))
        return list(cursor.fetchall())

    def is_transient(self, exc: BaseException) -> bool:
        # 1205: chosen as deadlock victim; the transaction was rolled back.
        return (sqlstate(exc) == SERIALIZATION_FAILURE
                or DEADLOCK_VICTIM in native_errors(exc))
