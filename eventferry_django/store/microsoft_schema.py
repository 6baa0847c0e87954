"""SQL Server's DDL: each table and each of its indexes guarded on its own
(``sys.objects``, ``sys.indexes``) so that a re-run after a partial deployment creates
only what is missing. A part of the SQL Server
dialect (``dialect.schema``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from .schema import SchemaSql
from .tables import Check, Column, Index, Table


def unicode_literal(value: str) -> str:
    # Only validated identifiers reach this (no quotes possible), so no escaping needed.
    return f"N'{value}'"


class MicrosoftSchema(SchemaSql):
    """The DDL of microsoft's tables."""

    supports_include = True

    filtered_retention_index = True

    COLUMN_TYPES: ClassVar[dict[str, str]] = {
        "id": "BIGINT IDENTITY(1,1) NOT NULL",
        "text64": "NVARCHAR(64)",
        "text255": "NVARCHAR(255)",
        "text4000": "NVARCHAR(4000)",
        "json": "NVARCHAR(MAX)",
        "text": "NVARCHAR(MAX)",
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
        if column.kind == "json" and self.ops.native_json:
            return "JSON"
        return super().column_type(column)

    def default_clause(self, table: Table, column: Column) -> str:
        # Named, so a later ALTER can find the constraint without looking up a random name.
        name = self.ops.quote(table.name.default_constraint(column.name))
        return f" CONSTRAINT {name}{super().default_clause(table, column)}"

    def json_check(self, column: str) -> str | None:
        if self.ops.native_json:
            return None
        return f"ISJSON({self.ops.quote(column)}) = 1"

    def primary_key(self, table: Table) -> str:
        # A clustered B-tree on an ascending id is part of the design: row locks and
        # READPAST depend on it, a clustered columnstore would silently break both, and
        # new rows append at the end of the index instead of splitting pages.
        return (
            f"CONSTRAINT {self.ops.quote(table.name.primary_key)} "
            f"PRIMARY KEY CLUSTERED ({self.ops.quote('id')})"
        )

    def object_id(self, table: Table) -> str:
        return f"OBJECT_ID({unicode_literal(self.qualified(table))}, N'U')"

    def guarded_blocks(self, table: Table | None = None) -> list[tuple[str, str]]:
        """(guard condition, statement) pairs: the table first, then each index."""
        table = table or self.outbox
        create = f"CREATE TABLE {self.qualified(table)} {self.table_body(table, indent='    ')}"
        blocks = [(f"{self.object_id(table)} IS NULL", create)]
        blocks += [self.index_block(index, table) for index in table.indexes]
        return blocks

    def index_guard(self, index: Index, table: Table, *, exists: bool) -> str:
        return (
            f"{'' if exists else 'NOT '}EXISTS (SELECT 1 FROM sys.indexes "
            f"WHERE name = {unicode_literal(index.name)} AND object_id = {self.object_id(table)})"
        )

    def index_block(self, index: Index, table: Table) -> tuple[str, str]:
        return (self.index_guard(index, table, exists=False),
                f"CREATE NONCLUSTERED INDEX {self.index_definition(index, table)}")

    @staticmethod
    def batch(blocks: Sequence[tuple[str, str]]) -> str:
        """Guarded blocks as one batch (no ``GO``: mssql-django sends a string as is)."""
        return "\n".join(f"IF {guard}\nBEGIN\n    {statement};\nEND;"
                         for guard, statement in blocks)

    def create_statements(self, table: Table | None = None) -> list[str]:
        # One batch; each object under its own guard, so any missing part is repaired.
        return [self.batch(self.guarded_blocks(table))]

    def add_check_statements(self, table: Table, check: Check, reason: str) -> list[str]:
        # The server's own message names the constraint; the name carries ``reason``.
        guard = (f"NOT EXISTS (SELECT 1 FROM sys.check_constraints "
                 f"WHERE name = {unicode_literal(check.name)} "
                 f"AND parent_object_id = {self.object_id(table)})")
        add = f"ALTER TABLE {self.qualified(table)} ADD {self.check_definition(table, check)}"
        return [self.batch([(guard, add)])]

    def drop_statements(self, table: Table | None = None) -> list[str]:
        return [f"DROP TABLE IF EXISTS {self.qualified(table or self.outbox)};"]

    def sequential_key_statements(self, table: Table, *, on: bool = True) -> list[str]:
        """OPTIMIZE_FOR_SEQUENTIAL_KEY on the clustered identity key, where it exists.

        Every insert goes to the last page of the key, so many concurrent publishers
        queue on that page's latch; the option (SQL Server 2019, Azure SQL Database and
        Managed Instance) paces them so the latch keeps moving. It is printed by
        ``outbox_sql --optimize-sequential-key`` for a DBA who sees that contention, not
        run by a migration. SQL Server 2016 and 2017
        reject the option even in a branch not taken, so the ALTER is compiled only where
        the guard holds: major version 15 or later, or engine edition 5 (Azure SQL
        Database) or 8 (Managed Instance), whose version number says 12.
        """
        alter = (f"ALTER INDEX {self.ops.quote(table.name.primary_key)} ON {self.qualified(table)} "
                 f"SET (OPTIMIZE_FOR_SEQUENTIAL_KEY = {'ON' if on else 'OFF'})")
        return [
            "IF CAST(SERVERPROPERTY('ProductMajorVersion') AS INT) >= 15\n"
            "    OR CAST(SERVERPROPERTY('EngineEdition') AS INT) IN (5, 8)\n"
            f"    EXEC(N'{alter}');"
        ]
