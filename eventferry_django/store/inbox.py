"""The inbox bound to one database alias: recording a handled message and purging old
records. The SQL itself lives in the vendor modules."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from django.db import Error

from ..conf import get_settings
from .bound import BoundStore
from .tables import Table


class InboxStore(BoundStore):
    """The inbox table on one database alias (``EVENTFERRY["DATABASE"]`` by default)."""

    def __init__(self, using: str | None = None) -> None:
        super().__init__(using)
        self.table: Table = self.dialect.schema.inbox(get_settings().inbox_table_name)

    def record(self, consumer: str, message_id: str) -> bool:
        """Record the message as handled by ``consumer`` in the caller's transaction;
        True the first time, False when a committed record exists (see
        :meth:`~eventferry_django.store.inbox_sql.InboxSql.record_message` for concurrency)."""
        with self.connection.cursor() as cursor:
            return self.dialect.inbox.record_message(cursor, self.table, consumer, message_id)

    def is_transient(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a deadlock or lock timeout that a redelivery may not meet."""
        return isinstance(exc, Error) and self.dialect.ops.is_transient(exc)

    def purge(
        self,
        older_than: dt.datetime,
        *,
        consumer: str | None = None,
        batch_size: int = 1000,
        max_rows: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Delete the records of messages handled before ``older_than`` (of ``consumer``
        only, if given), in batches, until a batch comes back short or ``max_rows`` (a
        soft cap) is passed."""
        cutoff = self.utc_param(older_than)
        return self.delete_in_batches(
            lambda cursor, limit: self.dialect.inbox.inbox_purge_batch(
                cursor, self.table, cutoff, consumer, limit),
            batch_size=batch_size, max_rows=max_rows, progress=progress,
        )
