"""The DDL of the contract's tables on one vendor: a part of the vendor's dialect
(``dialect.schema``), as Django's schema editor is a part of its backend.

It renders any :class:`~.tables.Table` (the outbox, the inbox, the relay registry, the
task results, the bucket leases, the batches in flight) into guarded, idempotent DDL,
and the steps by which a later release changes a table (0.2.0's: the outbox refuses
claimed rows); each vendor module subclasses it to spell types, defaults, guards and
options. What a released migration runs is this DDL as it was when the release was
frozen (:mod:`eventferry_django.released_ddl`), never these methods at migrate time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..contract import CLAIMED, PENDING
from ..naming import TableName
from .ops import SqlOps
from .tables import (
    CLOSED_STATUSES_SQL,
    OPEN_STATUSES_SQL,
    Check,
    Column,
    Index,
    Table,
    bucket_index,
    bucket_leases_table,
    contract_indexes,
    in_flight_table,
    inbox_table,
    outbox_table,
    registry_table,
    retention_index,
    task_results_table,
)

#: What a refused write of status 1 says where the DDL words the refusal itself (SQLite's
#: triggers): elsewhere the vendor's own message names the constraint, and its name
#: (:attr:`~eventferry_django.naming.TableName.claimed_needs_0_2_check`) says the same.
CLAIMED_NEEDS_0_2 = ("a relay of eventferry-django 0.1.0 is claiming rows (status 1), which "
                     "0.2.0 refuses: upgrade it to 0.2.0")


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

    #: Whether the retention index is filtered on the closed statuses. Not on
    #: MariaDB/MySQL (no filtered indexes: the claim names
    #: the indexes it walks instead), nor on SQLite, whose planner uses a partial index
    #: only for a WHERE term identical to its filter (``status = 2`` does not match
    #: ``status IN (2, 4)``, so purge would lose its index), and which plans without
    #: statistics unless ANALYZE was run.
    filtered_retention_index: ClassVar[bool] = False

    #: Whether the outbox has the bucket index: everywhere relays share the aggregates
    #: out, so not on SQLite, whose single writer has its relays take turns instead.
    indexes_buckets: ClassVar[bool] = True

    #: Whether a CHECK added to a table checks the rows already there (and is refused
    #: while one fails it). Where it does not (PostgreSQL's NOT VALID, SQLite's
    #: triggers), release 0.2.0 refuses status 1 before handing the claimed rows back,
    #: so that a 0.1.0 relay cannot claim a row between the two, even in autocommit.
    checks_existing_rows: ClassVar[bool] = True

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
        """The relay registry beside this outbox."""
        return registry_table(self.ops.name.relay_registry)

    @property
    def bucket_leases(self) -> Table:
        """The bucket leases beside this outbox."""
        return bucket_leases_table(self.ops.name.bucket_leases)

    @property
    def in_flight(self) -> Table:
        """The batches in flight beside this outbox."""
        return in_flight_table(self.ops.name.in_flight)

    @property
    def task_results(self) -> Table:
        """The Django tasks' results beside this outbox."""
        return task_results_table(self.ops.name.task_results)

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
        nullable = {c.name for c in table.columns if c.nullable}
        for column in table.json_columns:
            expression = self.json_check(column)
            if expression is not None and column in nullable:
                # SQLite's json_valid(NULL) is 0, not NULL: a NULL is let through by name.
                expression = f"{self.ops.quote(column)} IS NULL OR {expression}"
            if expression is not None:
                constraints.append(
                    f"CONSTRAINT {q(table.name.json_check(column))} CHECK ({expression})"
                )
        constraints += [self.check_definition(table, c) for c in table.checks]
        return [c for c in constraints if c is not None]

    def check_expression(self, table: Table, check: Check, row: str = "") -> str:
        """``check``'s expression with its columns quoted (each prefixed with ``row``,
        where a trigger names the row it tests: ``NEW.``)."""
        return check.expression.format_map(
            {c.name: f"{row}{self.ops.quote(c.name)}" for c in table.columns})

    def check_definition(self, table: Table, check: Check) -> str:
        return (f"CONSTRAINT {self.ops.quote(check.name)} "
                f"CHECK ({self.check_expression(table, check)})")

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

    def indexes(self) -> tuple[Index, ...]:
        """The outbox's indexes: the claim's two, the retention index, and the bucket
        index where :attr:`indexes_buckets`."""
        name, partial = self.ops.name, self.supports_partial_index
        buckets = (bucket_index(name, partial=partial),) if self.indexes_buckets else ()
        return (*contract_indexes(name, partial=partial), self.retention_index, *buckets)

    @property
    def retention_index(self) -> Index:
        """The index purge and the archive's closed-row selections walk."""
        return retention_index(self.ops.name, closed_rows_only=self.filtered_retention_index)

    def drop_statements(self, table: Table | None = None) -> list[str]:
        return [f"DROP TABLE IF EXISTS {self.qualified(table or self.outbox)}"]

    def sequential_key_statements(self, table: Table, *, on: bool = True) -> list[str]:
        """Tuning of the primary key for inserts that all land on its last page (SQL
        Server's OPTIMIZE_FOR_SEQUENTIAL_KEY); nothing elsewhere."""
        return []

    # -- release 0.2.0: the outbox without claimed rows ------------------------------------
    def claimed_needs_0_2(self, table: Table) -> Check:
        """The CHECK refusing status 1 (claimed), which the one-write relay never writes:
        a 0.1.0 relay still running fails its every claim with this name and publishes
        nothing, where it would publish beside the 0.2.0 relays, which cannot see its
        claims."""
        return Check(table.name.claimed_needs_0_2_check, f"{{status}} <> {CLAIMED}")

    def hand_back_claimed_sql(self, table: Table) -> str:
        """The rows a 0.1.0 relay left claimed, pending again. No attempt is counted: the
        relay was most likely stopped for the upgrade, not killed by the event."""
        q = self.ops.quote
        return (f"UPDATE {self.qualified(table)} SET {q('status')} = {PENDING}, "
                f"{q('claimed_at')} = NULL, {q('next_retry_at')} = NULL "
                f"WHERE {q('status')} = {CLAIMED}")

    def claimed_status_statements(self, table: Table, *, forwards: bool) -> list[str]:
        """Release 0.2.0's step for the outbox: the claimed rows handed back and status 1
        refused from then on (:meth:`claimed_needs_0_2`), in the order
        :attr:`checks_existing_rows` allows. Backwards the refusal goes; the rows stay
        pending, which a 0.1.0 relay claims as any other."""
        check = self.claimed_needs_0_2(table)
        if not forwards:
            return self.drop_check_statements(table, check)
        refuse = self.add_check_statements(table, check, CLAIMED_NEEDS_0_2)
        hand_back = self.hand_back_claimed_sql(table)
        return [hand_back, *refuse] if self.checks_existing_rows else [*refuse, hand_back]

    def add_check_statements(self, table: Table, check: Check, reason: str) -> list[str]:
        """Add ``check`` to ``table`` unless it has a constraint of that name, guarded
        per vendor (PostgreSQL, MySQL and SQL Server have no ADD CONSTRAINT IF NOT
        EXISTS). ``reason`` is what a refused write says where the DDL words it
        (SQLite)."""
        raise NotImplementedError

    def drop_check_statements(self, table: Table, check: Check) -> list[str]:
        """Drop ``check`` if ``table`` has it: ``DROP CONSTRAINT IF EXISTS`` serves where
        the vendor has it (PostgreSQL, SQL Server 2016+)."""
        return [f"ALTER TABLE {self.qualified(table)} "
                f"DROP CONSTRAINT IF EXISTS {self.ops.quote(check.name)}"]
