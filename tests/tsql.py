"""T-SQL as sqlglot reads it: the second guard of the SQL Server path beside the golden
files, for every statement the tests render (no SQL Server runs here)."""

from __future__ import annotations

import sqlglot
from sqlglot import exp


def parse_tsql(sql: str) -> exp.Expr:
    """``sql``, one statement, parsed as T-SQL; fails where sqlglot cannot read it."""
    parsed = sqlglot.parse(sql, read="tsql")
    assert len(parsed) == 1 and parsed[0] is not None
    tree = parsed[0]
    # sqlglot falls back to an opaque Command for text it cannot parse: that is a failure.
    commands = [n.sql() for n in tree.walk() if isinstance(n, exp.Command)]
    assert not commands, f"sqlglot could not parse: {commands}"
    return tree


def as_tsql_parameters(sql: str) -> str:
    """pyodbc sends ? markers; sqlglot reads T-SQL variables, so number them @p1, @p2..."""
    parts = sql.split("%s")
    return "".join(f"{part}@p{i}" for i, part in enumerate(parts[:-1], 1)) + parts[-1]
