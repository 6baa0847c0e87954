"""The relay's every-pass statements kept prepared on PostgreSQL, unless a pooler stands
in the way.

Planning the claim costs about as much as running it, every pass. psycopg 3 can keep it
prepared, but only on a server-side-binding cursor, and Django's cursors bind
client-side; so the relay's hot statements run on one of those, on the same connection.

A prepared statement lives in one server session. PgBouncer before 1.21 in transaction
pooling mode gives each transaction whichever server session is free, so a statement
prepared in one is missing from the next ("does not exist", SQLSTATE 26000) or meets
another client's of the same name ("already exists", 42P05). The first such error turns
preparing off for that database alias in this process, with one warning, and goes up as
the database error it is: the relay runs the pass again after its outage pause,
unprepared. ``OPTIONS["prepare_threshold"] = None`` turns preparing off from the start.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import DatabaseError

try:
    import psycopg
except ImportError:  # psycopg2: statements are planned each time
    psycopg = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

#: psycopg ``prepare_threshold`` under which only statements executed with
#: ``prepare=True`` are prepared.
NEVER_BY_COUNT = 2**31 - 1

#: What a server session says when the statement prepared in another is asked for
#: (invalid_sql_statement_name) or another client's has its name (duplicate_prepared_statement).
LOST_TO_A_POOLER = frozenset({"26000", "42P05"})

#: Database aliases on which a pooler lost a prepared statement in this process.
_pooled_aliases: set[str] = set()


def execute_prepared(cursor: Any, sql: str, params: Sequence[Any]) -> Any | None:
    """Run ``sql`` prepared on ``cursor``'s connection and return the cursor to read, or
    None where it cannot be prepared (psycopg2, opted out, behind a pooler that lost
    one): the caller runs it as usual then."""
    connection = getattr(getattr(cursor, "cursor", None), "connection", None)
    db = getattr(cursor, "db", None)
    options = getattr(db, "settings_dict", {}).get("OPTIONS", {})
    opted_out = "prepare_threshold" in options and options["prepare_threshold"] is None
    if (opted_out or psycopg is None or not isinstance(connection, psycopg.Connection)
            or db is None or db.alias in _pooled_aliases):
        return None
    if connection.prepare_threshold is None:
        # Django leaves psycopg's threshold at None unless OPTIONS set one, and None
        # also disables prepare=True. A threshold no statement reaches lets these be
        # prepared on request while every other statement stays as Django runs it.
        connection.prepare_threshold = NEVER_BY_COUNT
    prepared = psycopg.Cursor(connection)
    try:
        # Django's own error classes, as from any cursor, so callers need not know.
        with db.wrap_database_errors:
            prepared.execute(sql, params, prepare=True)
    except DatabaseError as exc:
        if getattr(exc.__cause__, "sqlstate", None) in LOST_TO_A_POOLER:
            _pooled_aliases.add(db.alias)
            logger.warning(
                "database %r lost a prepared statement between transactions (%s): a pooler "
                "in transaction mode, such as PgBouncer before 1.21, is in the way; the "
                "relay's statements are no longer prepared there. Set its "
                "OPTIONS['prepare_threshold'] = None to start that way", db.alias, exc)
        raise
    return prepared
