"""A vendor's dialect bound to one database alias, with what every store built on it
needs: running operations with the right transaction handling, trying again after a
deadlock, and deleting in bounded batches."""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, TypeVar

from django.conf import settings as django_settings
from django.db import Error, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from ..conf import get_settings
from ..contract import MAX_BATCH
from ..exceptions import EventferryError
from . import dialect_for
from .base import Dialect

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: How many times an operation that lost a deadlock is tried in all.
TRANSIENT_ATTEMPTS = 4


def utc_value(dialect: Dialect, moment: dt.datetime) -> dt.datetime:
    """``moment`` as a value the ORM compares the UTC columns of ``dialect`` with
    correctly.

    The columns hold the database's UTC clock whatever ``USE_TZ`` says, but with
    ``USE_TZ = False`` Django binds a datetime as local wall time of ``TIME_ZONE``.
    Then only timestamptz (which carries the zone) takes an aware value; the other
    vendors' columns are compared with UTC wall time. A naive ``moment`` is read as
    Django reads one: in the current time zone.
    """
    aware = moment if timezone.is_aware(moment) else timezone.make_aware(moment)
    utc = aware.astimezone(dt.UTC)
    if django_settings.USE_TZ or dialect.features.zoned_timestamps:
        return utc
    return utc.replace(tzinfo=None)


def utc_param(connection: BaseDatabaseWrapper, dialect: Dialect, moment: dt.datetime) -> Any:
    """``moment`` bound as a parameter of ``dialect``'s own SQL (see :func:`utc_value`)."""
    return connection.ops.adapt_datetimefield_value(utc_value(dialect, moment))


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

    def utc_value(self, moment: dt.datetime) -> dt.datetime:
        """``moment`` as a value the ORM compares the UTC columns with correctly (see
        :func:`utc_value`)."""
        return utc_value(self.dialect, moment)

    def utc_param(self, moment: dt.datetime) -> Any:
        """``moment`` bound as a parameter of our own SQL (see :func:`utc_value`)."""
        return utc_param(self.connection, self.dialect, moment)

    def _run(self, operation: Callable[[Any], T], *, atomic: bool = True) -> T:
        """Run ``operation`` with a cursor; in a transaction only when it issues more
        than one statement (autocommit saves a BEGIN and a COMMIT round trip) or when
        the vendor can let the transaction's commit skip the wait for durability.

        A deadlock victim (or another error the vendor calls transient) is run again
        from the start: every operation here is conditioned on the rows' current state
        (status, lease), so repeating a rolled-back one is safe. Not inside a caller's
        transaction, though: that one is lost and only the caller can repeat it.
        """
        setup = self.dialect.ops.relay_transaction_sql
        for attempt in range(1, TRANSIENT_ATTEMPTS + 1):
            scope = transaction.atomic(using=self.alias) if atomic or setup else nullcontext()
            in_callers_transaction = self.connection.in_atomic_block
            try:
                with scope, self.connection.cursor() as cursor:
                    if setup:
                        cursor.execute(setup)
                    return operation(cursor)
            # Error, not DatabaseError: pyodbc raises a deadlock victim (40001) as its
            # base Error, which Django does not file under DatabaseError.
            except Error as exc:
                if (attempt == TRANSIENT_ATTEMPTS or in_callers_transaction
                        or not self.dialect.ops.is_transient(exc)):
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
        # Bounded by the vendor (SQL Server: below its lock escalation threshold).
        batch_size = min(batch_size, self.dialect.purge.max_delete_batch)
        deleted = 0
        while max_rows is None or deleted < max_rows:
            batch = self._run(lambda cursor: delete_batch(cursor, batch_size), atomic=False)
            deleted += batch
            if progress is not None:
                progress(deleted)
            if batch < batch_size:
                break
        return deleted
