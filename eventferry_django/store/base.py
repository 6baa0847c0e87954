"""What every vendor's SQL has in common: the table's shape and the dialect interface.

The columns, constraints and indexes are described once here; each vendor module says
how its dialect spells them (types, quoting, guards) and holds all of its own SQL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from ..naming import QUOTES, TableName


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # a key of the dialect's COLUMN_TYPES
    nullable: bool = False
    default: str | None = None  # a key of the dialect's DEFAULTS


#: The contract's table, in order. ``kind`` and ``default`` are logical names that each
#: dialect maps to its own types and expressions.
COLUMNS: tuple[Column, ...] = (
    Column("id", "id"),
    Column("message_id", "text64"),
    Column("topic", "text255"),
    Column("aggregate_type", "text255"),
    Column("aggregate_id", "text255"),
    Column("partition_key", "text255", nullable=True),
    Column("payload", "json"),
    Column("headers", "json", default="empty_json"),
    Column("trace_id", "text255", nullable=True),
    Column("status", "tinyint", default="zero"),
    Column("attempts", "int", default="zero"),
    Column("claimed_at", "timestamp", nullable=True),
    Column("next_retry_at", "timestamp", nullable=True),
    Column("created_at", "timestamp", default="now"),
    Column("processed_at", "timestamp", nullable=True),
    Column("last_error", "text4000", nullable=True),
)

JSON_COLUMNS = tuple(c.name for c in COLUMNS if c.kind == "json")

#: Columns publish_event() writes; the rest take their database defaults.
INSERT_COLUMNS: tuple[str, ...] = (
    "message_id",
    "topic",
    "aggregate_type",
    "aggregate_id",
    "partition_key",
    "payload",
    "headers",
    "trace_id",
)

#: Status codes that hold back later events of the same aggregate (pending, claimed,
#: failed). Spelled as SQL because it appears in index predicates.
OPEN_STATUSES_SQL = "(0, 1, 3)"


@dataclass(frozen=True)
class Index:
    name: str
    keys: tuple[str, ...]
    include: tuple[str, ...] = ()
    open_rows_only: bool = False


def contract_indexes(name: TableName) -> tuple[Index, ...]:
    return (
        # The head-of-aggregate probe: "is there an earlier open row of this aggregate?"
        Index(name.aggregate_index, ("aggregate_id", "id"), include=("status",)),
        # The claim scan, over open rows only, so retained done rows cost it nothing.
        Index(
            name.claim_index,
            ("status", "next_retry_at", "id"),
            include=("aggregate_id", "claimed_at"),
            open_rows_only=True,
        ),
        # The retention scan of purge.
        Index(name.retention_index, ("status", "processed_at")),
    )


class Dialect:
    """All SQL of one vendor, for one outbox table.

    Subclasses set the class attributes and override the hooks whose spelling differs;
    rendering the shared shape happens here once.
    """

    vendor: ClassVar[str]
    COLUMN_TYPES: ClassVar[Mapping[str, str]]
    DEFAULTS: ClassVar[Mapping[str, str]]
    #: Whether ``CREATE INDEX ... INCLUDE (...)`` exists; without it the included
    #: columns become trailing key columns, which covers the same queries.
    supports_include: ClassVar[bool] = False
    #: Whether filtered (partial) indexes exist.
    supports_partial_index: ClassVar[bool] = True

    def __init__(self, name: TableName, *, native_json: bool = False) -> None:
        self.name = name.for_vendor(self.vendor)
        self.native_json = native_json
        self.table = self.name.quoted(self.vendor)
        self._insert_sql: dict[int, str] = {}

    # -- identifiers and literals ------------------------------------------------------
    def quote(self, identifier: str) -> str:
        opening, closing = QUOTES[self.vendor]
        return f"{opening}{identifier}{closing}"

    def columns(self, names: Sequence[str]) -> str:
        return ", ".join(self.quote(n) for n in names)

    # -- DDL ---------------------------------------------------------------------------
    def column_type(self, column: Column) -> str:
        return self.COLUMN_TYPES[column.kind]

    def default_clause(self, column: Column) -> str:
        assert column.default is not None
        return f" DEFAULT {self.DEFAULTS[column.default]}"

    def column_definition(self, column: Column) -> str:
        definition = f"{self.quote(column.name)} {self.column_type(column)}"
        if column.kind != "id":
            definition += " NULL" if column.nullable else " NOT NULL"
        if column.default is not None:
            definition += self.default_clause(column)
        return definition

    def json_check(self, column: str) -> str | None:
        """A CHECK expression that the column holds valid JSON, or None when the type
        already guarantees it."""
        raise NotImplementedError

    def primary_key(self) -> str | None:
        return f"CONSTRAINT {self.quote(self.name.primary_key)} PRIMARY KEY ({self.quote('id')})"

    def table_constraints(self) -> list[str]:
        n, q = self.name, self.quote
        constraints = [self.primary_key()]
        constraints.append(f"CONSTRAINT {q(n.message_id_unique)} UNIQUE ({q('message_id')})")
        for column, check_name in (("payload", n.payload_check), ("headers", n.headers_check)):
            expression = self.json_check(column)
            if expression is not None:
                constraints.append(f"CONSTRAINT {q(check_name)} CHECK ({expression})")
        constraints.append(
            f"CONSTRAINT {q(n.status_check)} CHECK ({q('status')} IN (0, 1, 2, 3, 4))"
        )
        constraints.append(
            f"CONSTRAINT {q(n.claimed_check)} "
            f"CHECK ({q('status')} <> 1 OR {q('claimed_at')} IS NOT NULL)"
        )
        return [c for c in constraints if c is not None]

    def table_body(self, indent: str = "") -> str:
        lines = [self.column_definition(c) for c in COLUMNS] + self.table_constraints()
        return "(\n" + ",\n".join(f"{indent}    {line}" for line in lines) + f"\n{indent})"

    def index_definition(self, index: Index) -> str:
        keys = index.keys if self.supports_include else index.keys + index.include
        sql = f"{self.quote(index.name)} ON {self.table} ({self.columns(keys)})"
        if self.supports_include and index.include:
            sql += f" INCLUDE ({self.columns(index.include)})"
        if index.open_rows_only and self.supports_partial_index:
            sql += f" WHERE {self.quote('status')} IN {OPEN_STATUSES_SQL}"
        return sql

    def create_statements(self) -> list[str]:
        """The guarded, idempotent DDL that creates whatever part of the table is missing.

        ``IF NOT EXISTS`` serves where the vendor has it for tables and indexes alike.
        """
        statements = [f"CREATE TABLE IF NOT EXISTS {self.table} {self.table_body()}"]
        statements += [
            f"CREATE INDEX IF NOT EXISTS {self.index_definition(index)}"
            for index in contract_indexes(self.name)
        ]
        return statements

    def drop_statements(self) -> list[str]:
        return [f"DROP TABLE IF EXISTS {self.table}"]

    # -- DML ---------------------------------------------------------------------------
    #: The placeholder for a JSON value; PostgreSQL casts, the others convert implicitly.
    json_placeholder: ClassVar[str] = "%s"

    def insert_sql(self, rows: int) -> str:
        """A multi-row INSERT of :data:`INSERT_COLUMNS` with Django ``%s`` placeholders."""
        sql = self._insert_sql.get(rows)
        if sql is None:
            row = "(" + ", ".join(
                self.json_placeholder if c in JSON_COLUMNS else "%s" for c in INSERT_COLUMNS
            ) + ")"
            sql = (
                f"INSERT INTO {self.table} ({self.columns(INSERT_COLUMNS)}) VALUES "
                + ", ".join([row] * rows)
            )
            self._insert_sql[rows] = sql
        return sql
