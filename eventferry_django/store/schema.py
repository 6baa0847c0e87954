"""The DDL of the contract's tables on one vendor: a part of the vendor's dialect
(``dialect.schema``), as Django's schema editor is a part of its backend.

It renders any :class:`~.tables.Table` (the outbox, the inbox) into guarded, idempotent
DDL, and the steps of each migration; each vendor module subclasses it to spell types,
defaults, guards and options.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..contract import PENDING
from ..naming import TableName
from .ops import SqlOps
from .tables import (
    BUCKET,
    CLOSED_STATUSES_SQL,
    OPEN_STATUSES_SQL,
    SCHEMA_VERSION,
    Column,
    Index,
    Table,
    bucket_index,
    closed_rows_index,
    contract_indexes,
    first_release_probe_index,
    inbox_table,
    outbox_table,
    registry_table,
)


class SchemaSql:
    """DDL for one outbox (named at construction) and any other table of the contract."""

    def __init__(self, ops: SqlOps) -> None:
        self.ops = ops

    COLUMN_TYPES: ClassVar[Mapping[str, str]]

    DEFAULTS: ClassVar[Mapping[str, str]]

    #: Whether ``CREATE INDEX ... INCLUDE (...)`` exists; without it the included
    #: columns become trailing key columns, which covers the same queries.
    supports_include: ClassVar[bool] = False

    #: Whether filtered (partial) indexes exist.
    supports_partial_index: ClassVar[bool] = True

    #: How the first release keyed its head-of-aggregate index: ``(aggregate_id,
    #: status, id)``, or SQL Server's ``(aggregate_id, id) INCLUDE (status)``. Only
    #: migration 0005's reverse builds that index now.
    status_keyed_probe: ClassVar[bool] = True

    #: Whether migration 0007 replaces the unfiltered retention index with one filtered
    #: on the closed statuses. Not on MariaDB/MySQL (no filtered indexes: the claim names
    #: the indexes it walks instead), nor on SQLite, whose planner uses a partial index
    #: only for a WHERE term identical to its filter (``status = 2`` does not match
    #: ``status IN (2, 4)``, so purge would lose its index), and which plans without
    #: statistics unless ANALYZE was run.
    filtered_retention_index: ClassVar[bool] = False

    # -- DDL ---------------------------------------------------------------------------
    # Every DDL method takes the table it renders; left out, that is this dialect's outbox.
    @property
    def outbox(self) -> Table:
        return outbox_table(self.ops.name, self.indexes())

    def inbox(self, name: TableName) -> Table:
        """The inbox named ``name`` (with this vendor's default schema filled in)."""
        return inbox_table(name.for_vendor(self.ops.vendor))

    @property
    def registry(self) -> Table:
        """The relay registry beside this outbox (migration 0009)."""
        return registry_table(self.ops.name.relay_registry)

    def qualified(self, table: Table) -> str:
        """The table's quoted, schema-qualified name."""
        return table.name.quoted(self.ops.vendor)

    def column_type(self, column: Column) -> str:
        return self.COLUMN_TYPES[column.kind]

    def default_clause(self, table: Table, column: Column) -> str:
        assert column.default is not None
        return f" DEFAULT {self.DEFAULTS[column.default]}"

    def column_definition(self, table: Table, column: Column) -> str:
        definition = f"{self.ops.quote(column.name)} {self.column_type(column)}"
        if column.kind != "id":
            definition += " NULL" if column.nullable else " NOT NULL"
        if column.default is not None:
            definition += self.default_clause(table, column)
        return definition

    def json_check(self, column: str) -> str | None:
        """A CHECK expression that the column holds valid JSON, or None when the type
        already guarantees it."""
        raise NotImplementedError

    def primary_key(self, table: Table) -> str | None:
        return (f"CONSTRAINT {self.ops.quote(table.name.primary_key)} "
                f"PRIMARY KEY ({self.ops.quote('id')})")

    def table_constraints(self, table: Table) -> list[str]:
        q = self.ops.quote
        constraints = [self.primary_key(table)]
        constraints += [f"CONSTRAINT {q(u.name)} UNIQUE ({self.ops.columns(u.columns)})"
                        for u in table.uniques]
        for column in table.json_columns:
            expression = self.json_check(column)
            if expression is not None:
                constraints.append(
                    f"CONSTRAINT {q(table.name.json_check(column))} CHECK ({expression})"
                )
        quoted = {c.name: q(c.name) for c in table.columns}
        constraints += [f"CONSTRAINT {q(c.name)} CHECK ({c.expression.format_map(quoted)})"
                        for c in table.checks]
        return [c for c in constraints if c is not None]

    def table_body(self, table: Table, indent: str = "") -> str:
        lines = ([self.column_definition(table, c) for c in table.columns]
                 + self.table_constraints(table))
        return "(\n" + ",\n".join(f"{indent}    {line}" for line in lines) + f"\n{indent})"

    def index_definition(self, index: Index, table: Table | None = None) -> str:
        table = table or self.outbox
        keys = index.keys if self.supports_include else index.keys + index.include
        sql = f"{self.ops.quote(index.name)} ON {self.qualified(table)} ({self.ops.columns(keys)})"
        if self.supports_include and index.include:
            sql += f" INCLUDE ({self.ops.columns(index.include)})"
        if index.open_rows_only and self.supports_partial_index:
            sql += f" WHERE {self.ops.quote('status')} IN {OPEN_STATUSES_SQL}"
        elif index.closed_rows_only and self.supports_partial_index:
            sql += f" WHERE {self.ops.quote('status')} IN {CLOSED_STATUSES_SQL}"
        elif index.fresh_rows_only and self.supports_partial_index:
            sql += (f" WHERE {self.ops.quote('status')} = {PENDING} "
                    f"AND {self.ops.quote('next_retry_at')} IS NULL")
        return sql

    def create_statements(self, table: Table | None = None) -> list[str]:
        """The guarded, idempotent DDL that creates whatever part of the table is missing.

        ``IF NOT EXISTS`` serves where the vendor has it for tables and indexes alike.
        """
        table = table or self.outbox
        statements = [f"CREATE TABLE IF NOT EXISTS {self.qualified(table)} "
                      f"{self.table_body(table)}{self.table_options(table)}"]
        for index in table.indexes:
            statements += self.create_index_statements(index, table)
        return statements

    def table_options(self, table: Table) -> str:
        """What follows the column list of ``table``'s CREATE TABLE (storage engine,
        storage parameters), with its leading space; nothing by default."""
        return ""

    def create_index_statements(self, index: Index, table: Table) -> list[str]:
        """Create ``index`` on ``table`` unless an index of that name exists."""
        return [f"CREATE INDEX IF NOT EXISTS {self.index_definition(index, table)}"]

    def drop_index_statements(self, index: Index, table: Table) -> list[str]:
        """Drop ``index`` from ``table`` if it exists."""
        qualified = TableName(index.name, table.name.schema).quoted(self.ops.vendor)
        return [f"DROP INDEX IF EXISTS {qualified}"]

    def indexes(self) -> tuple[Index, ...]:
        """The outbox's indexes as migration 0001 builds them (released DDL: frozen)."""
        return contract_indexes(self.ops.name, partial=self.supports_partial_index)

    def migrated_indexes(self) -> tuple[Index, ...]:
        """The outbox's indexes once every migration has run: 0001's, with 0007's
        closed-rows retention index in place of the unfiltered one where the vendor has
        filtered indexes, and 0010's bucket index where the vendor has one."""
        built = self.indexes()
        buckets = (self.bucket_index,) if self.indexes_buckets else ()
        return (*built[:-1], self.retention_index, *buckets)

    @property
    def retention_index(self) -> Index:
        """The index purge and the archive's closed-row selections walk, once every
        migration has run."""
        if self.filtered_retention_index:
            return closed_rows_index(self.ops.name)
        return self.indexes()[-1]

    #: Whether migration 0010 indexes the buckets: everywhere relays share the aggregates
    #: out, so not on SQLite, whose single writer has its relays take turns instead.
    indexes_buckets: ClassVar[bool] = True

    @property
    def bucket_index(self) -> Index:
        """Each bucket's fresh rows in id order (migration 0010)."""
        return bucket_index(self.ops.name, partial=self.supports_partial_index)

    def bucket_statements(self, *, forwards: bool = True) -> list[str]:
        """Migration 0010: the outbox's nullable ``bucket`` column, then its index where
        :attr:`indexes_buckets` (forwards); the other way round backwards. Each step is
        guarded (but SQLite's column: see :attr:`guards_columns`). A nullable column
        without a default changes only the catalog; the index is built from the rows
        already there, and rows written before it keep a null bucket (any relay claims
        those)."""
        table = self.outbox
        index = ([self.bucket_index] if self.indexes_buckets else [])
        if forwards:
            return [*self.add_column_statements(BUCKET, table),
                    *(sql for i in index for sql in self.create_index_statements(i, table))]
        return [*(sql for i in index for sql in self.drop_index_statements(i, table)),
                *self.drop_column_statements(BUCKET, table)]

    def closed_rows_index_statements(self, *, forwards: bool = True) -> list[str]:
        """Migration 0007: replace the unfiltered retention index ``(status,
        processed_at)`` with one filtered on the closed statuses (forwards), or the other
        way round, where :attr:`filtered_retention_index` says so; elsewhere nothing
        changes. Each step is guarded; the new index is
        built before the old one goes, so purge always has one to walk."""
        if not self.filtered_retention_index:
            return []
        table = self.outbox
        old, new = self.indexes()[-1], closed_rows_index(self.ops.name)
        build, drop = (new, old) if forwards else (old, new)
        return self.create_index_statements(build, table) + self.drop_index_statements(
            drop, table)

    def open_rows_index_statements(self, *, forwards: bool = True) -> list[str]:
        """Migration 0005: replace the first release's head-of-aggregate index with the
        open-rows index (forwards), or the other way round. Each step is guarded, so
        running it again, or on a table 0001 created with the new index already, only
        does what is missing. The new index is built before the old one goes, so the
        claim always has one to probe."""
        table = self.outbox
        new = table.indexes[0]
        old = first_release_probe_index(self.ops.name, status_keyed=self.status_keyed_probe)
        build, drop = (new, old) if forwards else (old, new)
        return self.create_index_statements(build, table) + self.drop_index_statements(
            drop, table)

    #: Whether the vendor's DDL can guard adding or dropping a column itself. SQLite's
    #: ALTER TABLE cannot: its migration step looks at the table first instead (see
    #: :class:`~eventferry_django.migration_operations.AddSchemaVersionColumn`).
    guards_columns: ClassVar[bool] = True

    def schema_version_statements(self, *, forwards: bool = True) -> list[str]:
        """Migration 0008: add the nullable ``schema_version`` column to the outbox
        (forwards) or drop it; guarded, so running it again changes nothing. A nullable
        column without a default is added without rewriting the table."""
        table = self.outbox
        if forwards:
            return self.add_column_statements(SCHEMA_VERSION, table)
        return self.drop_column_statements(SCHEMA_VERSION, table)

    def column_count_sql(self, column: Column, table: Table) -> str:
        """A query answering 1 when ``table`` has ``column``, 0 when not; for vendors whose
        ALTER TABLE cannot guard itself (:attr:`guards_columns`)."""
        schema = f"'{table.name.schema}'" if table.name.schema else "CURRENT_SCHEMA"
        return (f"SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = "
                f"{schema} AND table_name = '{table.name.table}' "
                f"AND column_name = '{column.name}'")

    def add_column_statements(self, column: Column, table: Table) -> list[str]:
        """Add ``column`` to ``table`` unless it has a column of that name."""
        return [f"ALTER TABLE {self.qualified(table)} ADD COLUMN IF NOT EXISTS "
                f"{self.column_definition(table, column)}"]

    def drop_column_statements(self, column: Column, table: Table) -> list[str]:
        """Drop ``column`` from ``table`` if it is there."""
        return [f"ALTER TABLE {self.qualified(table)} DROP COLUMN IF EXISTS "
                f"{self.ops.quote(column.name)}"]

    def autovacuum_statements(self, *, forwards: bool = True) -> list[str]:
        """Migration 0006: the outbox's autovacuum tuning on an existing table (forwards)
        or back to the server's defaults. Only PostgreSQL has it; nothing elsewhere."""
        return []

    def drop_statements(self, table: Table | None = None) -> list[str]:
        return [f"DROP TABLE IF EXISTS {self.qualified(table or self.outbox)}"]

    def sequential_key_statements(self, table: Table, *, on: bool = True) -> list[str]:
        """Tuning of the primary key for inserts that all land on its last page (SQL
        Server's OPTIMIZE_FOR_SEQUENTIAL_KEY); nothing elsewhere."""
        return []
