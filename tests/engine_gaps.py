"""Where the local T-SQL endpoint (Babelfish for PostgreSQL) is not SQL Server.

The SQL Server leg of the suite runs on a real SQL Server or on that endpoint. A test that
fails there only because the engine does not behave like SQL Server is marked

    @babelfish_gap("locking-hints-ignored", "READPAST does not skip locked rows")

and skipped, with the gap's name and reason, only when ``SELECT @@VERSION`` of the test
database says Babelfish: on a real SQL Server the same test runs unskipped. Gap names are
the fixed set below, so the report groups them and a typo is an error at collection.
The T-SQL under test stays what SQL Server wants; the engine's README
(shared/tds-engine/README.md) describes each gap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from django.db import connections

GAPS = {
    # USE_TZ=True: mssql-django binds None for a datetimeoffset column in a way the
    # engine cannot convert (auth_user.last_login, so every admin login).
    "datetimeoffset-null",
    # sys.indexes.name is lowercased and hash-suffixed: guarded CREATE INDEX runs twice.
    "sys-indexes-names",
    # SET NOCOUNT/XACT_ABORT inside a prepared batch stay on for the session.
    "prepared-batch-set-leaks",
    # sp_describe_undeclared_parameters fails on >4,000-character statements with NULL
    # parameters and rolls back the caller's transaction.
    "describe-parameters-long-statement",
    # READPAST/UPDLOCK/ROWLOCK/READCOMMITTEDLOCK parse but do nothing.
    "locking-hints-ignored",
    # A new connection and the first statements take seconds, not milliseconds.
    "slow-start-up",
    # ALTER TABLE ... NOCHECK CONSTRAINT is ignored (the setup's escape hatch), so
    # mssql-django's flush must delete referencing tables first (children_first_flush).
    "nocheck-constraint-ignored",
    # jTDS's login (TDS 7.1, no PRELOGIN without SSL) is closed by the engine
    # (babelfish_extensions#2137), and Microsoft's mssql-jdbc is not packaged here.
    "jtds-login-refused",
    # A connection's first #temp table or table variable (the claim batch's) makes the
    # engine re-plan foreign-key checks cached before it with the schema prefixed twice
    # (babelfish_extensions#3058, BABEL-5270): temp_namespace_first.
    "fk-plans-before-temp-table",
}

F = TypeVar("F", bound=Callable[..., Any])

_babelfish: dict[str, bool] = {}


def babelfish_gap(name: str, reason: str) -> pytest.MarkDecorator:
    """Mark a test that a known gap of the T-SQL endpoint breaks (see the module doc)."""
    if name not in GAPS:
        raise ValueError(f"unknown Babelfish gap {name!r}; known: {sorted(GAPS)}")
    return pytest.mark.babelfish_gap(name=name, reason=reason)


def is_babelfish(alias: str = "default") -> bool:
    """Whether the database behind ``alias`` is Babelfish, from its @@VERSION (cached)."""
    connection = connections[alias]
    if connection.vendor != "microsoft":
        return False
    if alias not in _babelfish:
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@VERSION")
            _babelfish[alias] = str(cursor.fetchone()[0]).startswith("Babelfish")
    return _babelfish[alias]


def skip_for_gap(name: str, reason: str, alias: str = "default") -> None:
    """Skip now, as a marked test would be, when ``alias`` is Babelfish: for session
    fixtures, which are set up before any test's marker is looked at."""
    babelfish_gap(name, reason)  # the name must be a known gap
    if is_babelfish(alias):
        pytest.skip(f"Babelfish gap {name}: {reason}")


def skip_if_gap(item: pytest.Item, unblock: Callable[[], Any]) -> None:
    """Skip ``item`` when it carries a babelfish_gap marker and runs on Babelfish."""
    marks = list(item.iter_markers("babelfish_gap"))
    if not marks or connections["default"].vendor != "microsoft":
        return
    with unblock():
        babelfish = is_babelfish()
    if babelfish:
        mark = marks[0]
        pytest.skip(f"Babelfish gap {mark.kwargs['name']}: {mark.kwargs['reason']}")


def children_first_flush(connection: Any) -> None:
    """Make mssql-django's flush delete referencing tables first, on every connection.

    mssql-django disables every foreign key with ``NOCHECK`` and then deletes the tables
    in any order: right on SQL Server. Babelfish ignores ``NOCHECK``, so a teardown that
    deletes ``django_content_type`` before ``auth_permission`` fails; on that engine only,
    the DELETEs are put in an order the foreign keys allow. Nothing else changes.

    The operations class of ``connection`` is patched, not the one wrapper: under a
    running event loop (Playwright's sync API in the browser tests) Django hands out
    another wrapper for the same alias, and its flush needs the order too.
    """
    ops_class = type(connection.ops)
    if getattr(ops_class, "_children_first", False):
        return
    original = ops_class.sql_flush

    def sql_flush(self: Any, style: Any, tables: Any, *args: Any, **kwargs: Any) -> list[str]:
        statements: list[str] = original(self, style, tables, *args, **kwargs)
        with self.connection.cursor() as cursor:
            cursor.execute(
                "SELECT OBJECT_NAME(parent_object_id), OBJECT_NAME(referenced_object_id) "
                "FROM sys.foreign_keys WHERE parent_object_id <> referenced_object_id"
            )
            references = [(str(child), str(parent)) for child, parent in cursor.fetchall()]
        depth = _depths(references)

        def key(statement: str) -> int:
            # DELETE FROM [table]; deeper children (higher depth) go first
            if not statement.upper().startswith("DELETE"):
                return 0
            table = statement.rsplit("[", 1)[-1].split("]", 1)[0]
            return -depth.get(table, 0)

        deletes = sorted((s for s in statements if s.upper().startswith("DELETE")), key=key)
        others = iter(statements)
        ordered: list[str] = []
        pending = iter(deletes)
        for statement in others:
            ordered.append(next(pending) if statement.upper().startswith("DELETE") else statement)
        return ordered

    ops_class.sql_flush = sql_flush
    ops_class._children_first = True


def temp_namespace_first(connection: Any) -> None:
    """Give every new connection its temporary namespace before anything else runs.

    Gap ``fk-plans-before-temp-table``: the engine checks foreign keys with cached plans
    that name the physical schema (``<database>_dbo``). A connection's first ``#temp``
    table or table variable changes the effective search path, the engine re-plans those
    checks as T-SQL, maps the physical name as a logical one and looks for
    ``<database>_<database>_dbo.<table>``, which does not exist: the next flush (or any
    DELETE or INSERT a foreign key checks) fails. Here that happens when the session's
    first flush has cached the checks and a claim batch then declares its table
    variables. Creating and dropping a ``#temp`` table as a connection opens means no
    check is ever planned before the namespace exists. SQL Server has no such state, and
    the product's T-SQL does not change. The connection open now is closed, because
    checks may already be cached on it (post-migrate's inserts).
    """
    from django.db.backends.signals import connection_created

    connection_created.connect(_create_temp_namespace, dispatch_uid=_TEMP_NAMESPACE_UID)
    connection.close()


def connections_kept_between_tests() -> None:
    """Let a transactional test's connection serve the next test, as mssql-python's pool does.

    Gap ``slow-start-up``: the engine compiles each batch anew on every connection, and
    the claim batch takes it about four seconds of CPU. Django's TransactionTestCase
    closes every connection after each test (in case a rollback lost state set as a
    cursor was made; mssql-django sets none such), so on pyodbc, which has no pool here,
    each test that claims paid those seconds again: most of the SQL Server legs' CPU.
    SQL Server caches plans across connections and needs none of this.
    """
    from django.test import TransactionTestCase

    # A private hook of Django's (stable since 1.6), which its stubs leave out.
    TransactionTestCase._should_reload_connections = (  # type: ignore[attr-defined]
        classmethod(lambda cls: False))


_TEMP_NAMESPACE_UID = "eventferry-tests-babelfish-temp-namespace-first"


def _create_temp_namespace(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.vendor != "microsoft":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE #eventferry_temp_namespace (i INT); "
            "DROP TABLE #eventferry_temp_namespace;"
        )


def _depths(references: list[tuple[str, str]]) -> dict[str, int]:
    """How far each table is from the tables nothing of it references (children deeper)."""
    depth: dict[str, int] = {}
    for _ in range(len(references) + 1):
        changed = False
        for child, parent in references:
            wanted = depth.get(parent, 0) + 1
            if depth.get(child, 0) < wanted:
                depth[child] = wanted
                changed = True
        if not changed:
            break
    return depth
