"""A vendor's dialect bound to one database alias, with what every store built on it
needs: running operations with the right transaction handling, trying again after a
deadlock, and deleting in bounded batches."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, TypeVar

from django.db import DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from ..conf import get_settings
from ..exceptions import EventferryError
from . import dialect_for
from .base import MAX_BATCH, Dialect

logger = logging.getLogger("eventferry.store")

T = TypeVar("T")

#: How many times an operation that lost a deadlock is tried in all.
TRANSIENT_ATTEMPTS = 4


class BoundStore:
    """The dialect of the database behind ``using`` (``EVENTFERRY["DATABASE"]`` by
    default), for eventferry's tables as the settings name them."""

    def __init__(self, using: str | None = None) -> None:
        settings = get_settings()
        self.alias = using or settings.database
        self.dialect: Dialect = dialect_for(
            self.connection.vendor, settings.table_name, native_json=settings.native_json
        )

    @property
    def connection(self) -> BaseDatabaseWrapper:
        return connections[self.alias]

    def _run(self, operation: Callable[[Any], T], *, atomic: bool = True) -> T:
        """Run ``operation`` with a cursor; in a transaction only when it issues more
        than one statement (autocommit saves a BEGIN and a COMMIT round trip) or when
        the vendor can let the transaction's commit skip the wait for durability.

        A deadlock victim (or another error the vendor calls transient) is run again
        from the start: every operation here is conditioned on the rows' current state
        (status, lease), so repeating a rolled-back one is safe. Not inside a caller's
        transaction, though: that one is lost and only the caller can repeat it.
        """
        setup = self.dialect.relay_transaction_sql
        for attempt in range(1, TRANSIENT_ATTEMPTS + 1):
            scope = transaction.atomic(using=self.alias) if atomic or setup else nullcontext()
            in_callers_transaction = self.connection.in_atomic_block
            try:
                with scope, self.connection.cursor() as cursor:
                    if setup:
                        cursor.execute(setup)
                    return operation(cursor)
            except DatabaseError as exc:
                if (attempt == TRANSIENT_ATTEMPTS or in_callers_transaction
                        or not self.dialect.is_transient(exc)):
                    raise
                logger.info("transient database error, trying again (%d/%d): %s",
                            attempt, TRANSIENT_ATTEMPTS - 1, exc)
                time.sleep(random.uniform(0, 0.02 * attempt))
        raise AssertionError("unreachable")

    def delete_in_batches(
        self,
        delete_batch: Callable[[Any, int], int],
        *,
        batch_size: int,
        max_rows: int | None,
        progress: Callable[[int], None] | None,
    ) -> int:
        """Run ``delete_batch(cursor, batch_size)``, each in its own short transaction,
        until a batch comes back short or ``max_rows`` (a soft cap) is passed; returns
        the rows deleted. ``progress`` hears the running total after each batch."""
        if not 1 <= batch_size <= MAX_BATCH:
            raise EventferryError(f"batch_size must be 1..{MAX_BATCH:,}, got {batch_size!r}.")
        deleted = 0
        while max_rows is None or deleted < max_rows:
            batch = self._run(lambda cursor: delete_batch(cursor, batch_size), atomic=False)
            deleted += batch
            if progress is not None:
                progress(deleted)
            if batch < batch_size:
                break
        return deleted
