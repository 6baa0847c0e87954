"""SQL Server (2016 SP1+, Azure SQL Database, Managed Instance): all of its T-SQL.

The DDL is one batch of independently guarded blocks, so re-running it after a partial
deployment (say a DBA created the table but not the indexes) creates only what is
missing. mssql-django sends a statement string to the server as one batch; ``GO`` is a
client-side separator that it does not understand, so none is emitted.
"""

from __future__ import annotations

from typing import ClassVar

from .base import Column, Dialect, contract_indexes


def _unicode_literal(value: str) -> str:
    # Only validated identifiers reach this (no quotes possible), so no escaping needed.
    return f"N'{value}'"


class MicrosoftDialect(Dialect):
    vendor = "microsoft"
    supports_include = True
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

    def default_clause(self, column: Column) -> str:
        # Named, so a later ALTER can find the constraint without looking up a random name.
        name = self.quote(self.name.default_constraint(column.name))
        return f" CONSTRAINT {name}{super().default_clause(column)}"

    def json_check(self, column: str) -> str | None:
        if self.native_json:
            return None
        return f"ISJSON({self.quote(column)}) = 1"

    def primary_key(self) -> str:
        # A clustered B-tree on id is part of the design: row locks and READPAST depend
        # on it, and a clustered columnstore would silently break both.
        return (
            f"CONSTRAINT {self.quote(self.name.primary_key)} "
            f"PRIMARY KEY CLUSTERED ({self.quote('id')})"
        )

    @property
    def object_id(self) -> str:
        return f"OBJECT_ID({_unicode_literal(self.table)}, N'U')"

    def guarded_blocks(self) -> list[tuple[str, str]]:
        """(guard condition, statement) pairs: the table first, then each index."""
        table = f"CREATE TABLE {self.table} {self.table_body(indent='    ')}"
        blocks = [(f"{self.object_id} IS NULL", table)]
        for index in contract_indexes(self.name):
            guard = (
                "NOT EXISTS (SELECT 1 FROM sys.indexes "
                f"WHERE name = {_unicode_literal(index.name)} AND object_id = {self.object_id})"
            )
            blocks.append((guard, f"CREATE NONCLUSTERED INDEX {self.index_definition(index)}"))
        return blocks

    def create_statements(self) -> list[str]:
        # One batch; each object under its own guard, so any missing part is repaired.
        return ["\n".join(
            f"IF {guard}\nBEGIN\n    {statement};\nEND;"
            for guard, statement in self.guarded_blocks()
        )]

    def drop_statements(self) -> list[str]:
        return [f"DROP TABLE IF EXISTS {self.table};"]
