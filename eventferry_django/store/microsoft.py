"""SQL Server (2016 SP1+, Azure SQL Database, Managed Instance): the dialect and its
parts but the DDL (``microsoft_schema.py``), the claim (``microsoft_claim.py``) and the
reading of its errors (``microsoft_errors.py``).
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
from .microsoft_claim import MicrosoftClaim
from .microsoft_errors import DEADLOCK_VICTIM, SERIALIZATION_FAILURE, native_errors, sqlstate
from .microsoft_schema import MicrosoftSchema
from .ops import SqlOps
from .purge import PurgeSql
from .tables import (
    INBOX_KEY,
    JSON_COLUMNS,
    Table,
)

#: A scheduled delay is bound as days and milliseconds (see MicrosoftInserts.delay_sql).
MILLISECONDS_A_DAY = 86_400_000



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
        return f"CONVERT(VARCHAR(23), {self.ops.quote(column)}, 121)"

    def archive_column_sql(self, column: str) -> str:
        if column in JSON_COLUMNS and self.ops.native_json:
            return f"CAST({self.ops.quote(column)} AS NVARCHAR(MAX)) AS {self.ops.quote(column)}"
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
        q = self.ops.quote
        return (
            f"DELETE o FROM {self.ops.table} AS o WITH (ROWLOCK, READCOMMITTEDLOCK) "
            f"JOIN OPENJSON(%s) WITH ({q('id')} BIGINT '$[0]', "
            f"{q('processed_at')} DATETIME2(3) '$[1]') AS a "
            f"ON a.{q('id')} = o.{q('id')} AND a.{q('processed_at')} = o.{q('processed_at')} "
            f"WHERE o.{q('status')} IN ({codes(statuses)})"
        )


    def purge_selection_sql(self, selection: ClosedRowSelection) -> str:
        # Row locks, and the committed rows read, as purge_archived_sql says.
        return (f"DELETE FROM {self.ops.table} WITH (ROWLOCK, READCOMMITTEDLOCK) "
                f"WHERE {self.selection_condition(selection)}")




class MicrosoftFeatures(Features):
    @property
    def json_documents_only(self) -> bool:  # type: ignore[override]
        # ISJSON without a type argument (2016+; the argument needs 2022) is 1 only for
        # an object or an array.
        return not self.native_json


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


class MicrosoftPurge(PurgeSql):
    """Batch deletes on SQL Server: DELETE TOP, below lock escalation."""

    def delete_batch(
        self, cursor: Any, table: str, condition: str, params: Sequence[Any], limit: int,
        order: Sequence[str] = ("id",),
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
        q = self.ops.quote
        qualified = self.qualified(table)
        return (
            f"INSERT INTO {qualified} ({self.ops.columns(INBOX_KEY)})\n"
            "    SELECT %s, %s\n"
            f"    WHERE NOT EXISTS (SELECT 1 FROM {qualified} WITH (UPDLOCK, HOLDLOCK)\n"
            f"        WHERE {q('consumer')} = %s AND {q('message_id')} = %s)"
        )

    def record_message_params(self, consumer: str, message_id: str) -> list[Any]:
        return [consumer, message_id, consumer, message_id]


class MicrosoftOps(SqlOps):
    vendor = "microsoft"
    now_sql = "SYSUTCDATETIME()"
    first_row = ("TOP (1) ", "")
    # Times are bound at the column's precision: a DATETIME2(7) parameter would compare
    # unequal to a lease it should match, and a millisecond DATEADD overflows at ~24.8 days.
    timestamp_placeholder = "CAST(%s AS DATETIME2(3))"

    def now_plus_sql(self) -> str:
        return "DATEADD(MILLISECOND, %s, SYSUTCDATETIME())"

    def deleted_column(self, column: str) -> tuple[str, str] | None:
        return f" OUTPUT deleted.{self.quote(column)}", ""

    def ids_condition(self, ids: Sequence[int]) -> tuple[str, list[Any]]:
        # One parameter however many ids: SQL Server allows 2,100 parameters at most.
        return (
            f"{self.quote('id')} IN (SELECT [id] FROM OPENJSON(%s) WITH ([id] BIGINT '$'))",
            [json.dumps([int(i) for i in ids])],
        )

    def is_transient(self, exc: BaseException) -> bool:
        # 1205: chosen as deadlock victim; the transaction was rolled back.
        return (sqlstate(exc) == SERIALIZATION_FAILURE
                or DEADLOCK_VICTIM in native_errors(exc))


class MicrosoftDialect(Dialect):
    vendor = "microsoft"
    ops_class = MicrosoftOps
    claim_class = MicrosoftClaim
    features_class = MicrosoftFeatures
    schema_class = MicrosoftSchema
    inserts_class = MicrosoftInserts
    purge_class = MicrosoftPurge
    inbox_class = MicrosoftInbox
    closed_rows_class = MicrosoftClosedRows
