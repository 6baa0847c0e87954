"""Bounds the vendors put on a statement, each defined once for every module that keeps
under it (a vendor's dialect, the history pipeline's purge)."""

from __future__ import annotations

#: The most rows one DELETE takes on SQL Server. A statement escalates its row locks to a
#: table lock once it holds 5,000 on one table or index; a purge that did would block
#: every publisher and relay until it commits. 4,000 rows stays below on each of the
#: outbox's indexes.
SQL_SERVER_DELETE_ROWS = 4_000
