"""SQL Server (2016 SP1+, Azure SQL Database, Managed Instance): all of its T-SQL.

The DDL is one batch of independently guarded blocks, so re-running it after a partial
deployment (say a DBA created the table but not the indexes) creates only what is
missing. mssql-django sends a statement string to the server as one batch; ``GO`` is a
client-side separator that it does not understand, so none is emitted.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any, ClassVar

from .base import CLAIM_COLUMNS, INBOX_KEY, JSON_COLUMNS, Column, Dialect, Table
from .closed_rows import codes

#: SQL Server's error number for a deadlock victim; the operation is run again.
DEADLOCK_VICTIM = 1205

#: Types of the claim's table variable; json columns travel as NVARCHAR(MAX) either way.
_CLAIMED_TYPES = {
    "id": "BIGINT NOT NULL PRIMARY KEY",
    "message_id": "NVARCHAR(64) NOT NULL",
    "topic": "NVARCHAR(255) NOT NULL",
    "aggregate_type": "NVARCHAR(255) NOT NULL",
    "aggregate_id": "NVARCHAR(255) NOT NULL",
    "partition_key": "NVARCHAR(255) NULL",
    "payload": "NVARCHAR(MAX) NOT NULL",
    "headers": "NVARCHAR(MAX) NOT NULL",
    "trace_id": "NVARCHAR(255) NULL",
    "attempts": "INT NOT NULL",
    "claimed_at": "DATETIME2(3) NOT NULL",
}


def _unicode_literal(value: str) -> str:
    # Only validated identifiers reach this (no quotes possible), so no escaping needed.
    return f"N'{value}'"


class MicrosoftDialect(Dialect):
    vendor = "microsoft"
    supports_include = True
    status_keyed_probe = False
    COLUMN_TYPES: ClassVar[dict[str, str]] = {
        "id": "BIGINT IDENTITY(1,1) NOT NULL",
        "text64": "NVARCHAR(64)",
        "text255": "NVARCHAR(255)",
        "text4000": "NVARCHAR(4000)",
        "json": "NVARCHAR(MAX)",
        "tinyint": "TINYINT",
        "int": "INT",
        "timestamp": "DATETIME2(3)",
    }
    DEFAULTS: ClassVar[dict[str, str]] = {
        "empty_json": "(N'{}')",
        "zero": "(0)",
        "now": "(SYSUTCDATETIME())",
    }

    def column_type(self, column: Column) -> str:
        # SQL Server 2025 / current Azure SQL have a native json type; ISJSON checks are
        # then neither needed nor allowed.
        if column.kind == "json" and self.native_json:
            return "JSON"
        return super().column_type(column)

    def default_clause(self, table: Table, column: Column) -> str:
        # Named, so a later ALTER can find the constraint without looking up a random name.
        name = self.quote(table.name.default_constraint(column.name))
        return f" CONSTRAINT {name}{super().default_clause(table, column)}"

    def json_check(self, column: str) -> str | None:
        if self.native_json:
            return None
        return f"ISJSON({self.quote(column)}) = 1"

    def primary_key(self, table: Table) -> str:
        # A clustered B-tree on an ascending id is part of the design: row locks and
        # READPAST depend on it, a clustered columnstore would silently break both, and
        # new rows append at the end of the index instead of splitting pages.
        return (
            f"CONSTRAINT {self.quote(table.name.primary_key)} "
            f"PRIMARY KEY CLUSTERED ({self.quote('id')})"
        )

    def object_id(self, table: Table) -> str:
        return f"OBJECT_ID({_unicode_literal(self.qualified(table))}, N'U')"

    def guarded_blocks(self, table: Table | None = None) -> list[tuple[str, str]]:
        """(guard condition, statement) pairs: the table first, then each index."""
        table = table or self.outbox
        object_id = self.object_id(table)
        create = f"CREATE TABLE {self.qualified(table)} {self.table_body(table, indent='    ')}"
        blocks = [(f"{object_id} IS NULL", create)]
        for index in table.indexes:
            guard = (
                "NOT EXISTS (SELECT 1 FROM sys.indexes "
                f"WHERE name = {_unicode_literal(index.name)} AND object_id = {object_id})"
            )
            blocks.append(
                (guard, f"CREATE NONCLUSTERED INDEX {self.index_definition(index, table)}")
            )
        return blocks

    def create_statements(self, table: Table | None = None) -> list[str]:
        # One batch; each object under its own guard, so any missing part is repaired.
        return ["\n".join(
            f"IF {guard}\nBEGIN\n    {statement};\nEND;"
            for guard, statement in self.guarded_blocks(table)
        )]

    def drop_statements(self, table: Table | None = None) -> list[str]:
        return [f"DROP TABLE IF EXISTS {self.qualified(table or self.outbox)};"]

    # -- DML ---------------------------------------------------------------------------
    now_sql = "SYSUTCDATETIME()"
    qualify_set_columns = True
    # The claim batch commits or rolls back its own transaction (XACT_ABORT, TRY/CATCH),
    # so it is never nested inside another one.
    claim_joins_transaction = False
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

    def claim_declare_sql(self) -> str:
        q = self.quote
        declared = ",\n    ".join(f"{q(c)} {_CLAIMED_TYPES[c]}" for c in CLAIM_COLUMNS)
        return f"DECLARE @claimed TABLE (\n    {declared}\n)"

    def claim_update_sql(self) -> str:
        """Parameters: batch size, then the negative lease timeout in ms.

        Written as UPDATE ... FROM a derived table rather than a CTE: the same plan on SQL
        Server, and Babelfish rejects a CTE followed by UPDATE ... OUTPUT INTO. OUTPUT
        goes INTO a table variable because a bare OUTPUT fails once the table has a trigger.
        """
        q = self.quote
        output = ", ".join(f"inserted.{q(c)}" for c in CLAIM_COLUMNS)
        return (
            f"UPDATE o SET {self.claim_set_sql('o')}\n"
            f"    OUTPUT {output} INTO @claimed\n"
            f"    FROM {self.table} AS o\n"
            "    JOIN (\n"
            f"        SELECT TOP (%s) c.{q('id')}\n"
            f"        FROM {self.table} AS c WITH (READCOMMITTEDLOCK, READPAST, UPDLOCK, ROWLOCK)\n"
            f"        WHERE {self.claimable_sql('c')}\n"
            f"        ORDER BY c.{q('id')}\n"
            f"    ) AS picked ON picked.{q('id')} = o.{q('id')}\n"
            "    OPTION (MAXDOP 1)"
        )

    def claim_result_sql(self) -> str:
        return f"SELECT {self.columns(CLAIM_COLUMNS)} FROM @claimed ORDER BY {self.quote('id')}"

    def claim_sql(self) -> str:
        """The whole claim as one batch with its own transaction: XACT_ABORT plus
        TRY/CATCH, so any error rolls the claim back before it is re-raised."""
        return self.statement("claim", lambda: (
            "SET NOCOUNT ON;\n"
            "SET XACT_ABORT ON;\n"
            f"{self.claim_declare_sql()};\n"
            "BEGIN TRY\n"
            "    BEGIN TRANSACTION;\n"
            f"    {self.claim_update_sql()};\n"
            "    COMMIT TRANSACTION;\n"
            "END TRY\n"
            "BEGIN CATCH\n"
            "    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;\n"
            "    THROW;\n"
            "END CATCH;\n"
            f"{self.claim_result_sql()};"
        ))

    def claim(self, cursor: Any, limit: int, lease_timeout_ms: int) -> list[tuple[Any, ...]]:
        cursor.execute(self.claim_sql(), [limit, self.offset_param(-lease_timeout_ms)])
        return list(cursor.fetchall())

    def is_transient(self, exc: BaseException) -> bool:
        # 1205: chosen as deadlock victim; the batch was rolled back (XACT_ABORT).
        return any(str(DEADLOCK_VICTIM) in str(arg) for arg in exc.args)

    def delete_batch(
        self, cursor: Any, table: str, condition: str, params: Sequence[Any], limit: int
    ) -> int:
        # READPAST: a row locked by anyone is left for the next purge, never waited on.
        cursor.execute(
            f"DELETE TOP (%s) FROM {table} WITH (ROWLOCK, READPAST) WHERE {condition}",
            [limit, *params],
        )
        return int(cursor.rowcount)

    # -- history -----------------------------------------------------------------------
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
