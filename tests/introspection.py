"""What a real database says the outbox table looks like, read from its own catalog.

Kept per vendor in one place so the migration tests can compare every vendor with the
contract the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.backends.base.base import BaseDatabaseWrapper

from eventferry_django.naming import TableName


@dataclass
class IndexInfo:
    keys: list[str] = field(default_factory=list)
    included: list[str] = field(default_factory=list)
    partial: bool = False


@dataclass
class TableInfo:
    columns: list[tuple[str, str, bool]]  # name, lower-case type, nullable
    indexes: dict[str, IndexInfo]
    constraints: set[str]

    @property
    def types(self) -> dict[str, str]:
        return {name: kind for name, kind, _ in self.columns}


def exists(connection: BaseDatabaseWrapper, name: TableName) -> bool:
    return bool(describe(connection, name).columns)


def describe(connection: BaseDatabaseWrapper, name: TableName) -> TableInfo:
    name = name.for_vendor(connection.vendor)
    reader = {
        "postgresql": _postgresql,
        "mysql": _mysql,
        "sqlite": _sqlite,
        "microsoft": _microsoft,
    }[connection.vendor]
    with connection.cursor() as cursor:
        return reader(cursor, name)


def _schema_filter(name: TableName, current: str) -> tuple[str, list[str]]:
    return ("%s", [name.schema]) if name.schema else (current, [])


def _information_schema_columns(  # type: ignore[no-untyped-def]
    cursor, name: TableName, schema_sql: str, params: list[str]
) -> list[tuple[str, str, bool]]:
    cursor.execute(
        "SELECT column_name, data_type, is_nullable = 'YES' FROM information_schema.columns "
        f"WHERE table_schema = {schema_sql} AND table_name = %s ORDER BY ordinal_position",
        [*params, name.table],
    )
    return [(c, t.lower(), bool(n)) for c, t, n in cursor.fetchall()]


def _postgresql(cursor, name: TableName) -> TableInfo:  # type: ignore[no-untyped-def]
    schema_sql, params = _schema_filter(name, "current_schema()")
    columns = _information_schema_columns(cursor, name, schema_sql, params)
    cursor.execute(
        f"SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = {schema_sql} "
        "AND tablename = %s", [*params, name.table],
    )
    indexes = {}
    for index_name, definition in cursor.fetchall():
        body = definition.split(" USING btree ", 1)[1]
        keys_part, _, rest = body.partition(")")
        include = rest.split("INCLUDE (", 1)[1].split(")")[0] if "INCLUDE (" in rest else ""
        indexes[index_name] = IndexInfo(
            keys=[k.strip().strip('"') for k in keys_part.strip("(").split(",")],
            included=[k.strip().strip('"') for k in include.split(",") if k.strip()],
            partial=" WHERE " in definition,
        )
    constraints: set[str] = set()
    if columns:
        cursor.execute(
            "SELECT conname FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid "
            "JOIN pg_namespace n ON n.oid = t.relnamespace "
            f"WHERE n.nspname = {schema_sql} AND t.relname = %s", [*params, name.table],
        )
        constraints = {row[0] for row in cursor.fetchall()}
    return TableInfo(columns, indexes, constraints)


def _mysql(cursor, name: TableName) -> TableInfo:  # type: ignore[no-untyped-def]
    schema_sql, params = _schema_filter(name, "DATABASE()")
    columns = _information_schema_columns(cursor, name, schema_sql, params)
    cursor.execute(
        "SELECT index_name, column_name FROM information_schema.statistics "
        f"WHERE table_schema = {schema_sql} AND table_name = %s ORDER BY index_name, seq_in_index",
        [*params, name.table],
    )
    indexes: dict[str, IndexInfo] = {}
    for index_name, column in cursor.fetchall():
        indexes.setdefault(index_name, IndexInfo()).keys.append(column)
    cursor.execute(
        "SELECT constraint_name FROM information_schema.table_constraints "
        f"WHERE table_schema = {schema_sql} AND table_name = %s", [*params, name.table],
    )
    return TableInfo(columns, indexes, {row[0] for row in cursor.fetchall()})


def _sqlite(cursor, name: TableName) -> TableInfo:  # type: ignore[no-untyped-def]
    cursor.execute(f'PRAGMA table_info("{name.table}")')
    columns = [(row[1], row[2].lower(), not row[3] and not row[5]) for row in cursor.fetchall()]
    cursor.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = %s",
        [name.table],
    )
    indexes = {}
    for index_name, sql in cursor.fetchall():
        cursor.execute(f'PRAGMA index_info("{index_name}")')
        keys = [row[2] for row in sorted(cursor.fetchall())]
        indexes[index_name] = IndexInfo(keys=keys, partial=bool(sql and " WHERE " in sql))
    cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = %s",
                   [name.table])
    row = cursor.fetchone()
    table_sql = row[0] if row else ""
    constraints = {
        part.split('"')[1] for part in table_sql.split("CONSTRAINT ")[1:]
    }
    return TableInfo(columns, indexes, constraints)


def _microsoft(cursor, name: TableName) -> TableInfo:  # type: ignore[no-untyped-def]
    qualified = f"[{name.schema}].[{name.table}]"
    cursor.execute(
        "SELECT c.name, t.name, c.is_nullable FROM sys.columns c "
        "JOIN sys.types t ON t.user_type_id = c.user_type_id "
        "WHERE c.object_id = OBJECT_ID(%s) ORDER BY c.column_id", [qualified],
    )
    columns = [(c, t.lower(), bool(n)) for c, t, n in cursor.fetchall()]
    cursor.execute(
        "SELECT i.name, i.has_filter, c.name, ic.is_included_column FROM sys.indexes i "
        "JOIN sys.index_columns ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id "
        "JOIN sys.columns c ON c.object_id = ic.object_id AND c.column_id = ic.column_id "
        "WHERE i.object_id = OBJECT_ID(%s) ORDER BY i.name, ic.key_ordinal, ic.index_column_id",
        [qualified],
    )
    indexes: dict[str, IndexInfo] = {}
    for index_name, has_filter, column, included in cursor.fetchall():
        info = indexes.setdefault(index_name, IndexInfo(partial=bool(has_filter)))
        (info.included if included else info.keys).append(column)
    cursor.execute(
        "SELECT name FROM sys.objects WHERE parent_object_id = OBJECT_ID(%s) "
        "AND type IN ('C', 'D', 'PK', 'UQ')", [qualified],
    )
    return TableInfo(columns, indexes, {row[0] for row in cursor.fetchall()})


def drop_index(connection: BaseDatabaseWrapper, name: TableName, index: str) -> None:
    """Drop one index, as a half-finished deployment would have left it missing."""
    name = name.for_vendor(connection.vendor)
    table = name.quoted(connection.vendor)
    statement = {
        "postgresql": f'DROP INDEX "{name.schema}"."{index}"' if name.schema
        else f'DROP INDEX "{index}"',
        "mysql": f"DROP INDEX `{index}` ON {table}",
        "sqlite": f'DROP INDEX "{index}"',
        "microsoft": f"DROP INDEX [{index}] ON {table}",
    }[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(statement)
