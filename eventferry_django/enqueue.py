"""``publish_event()``: write an event into the outbox inside the caller's transaction.

The row commits or rolls back with the caller's own changes. Nothing else happens until
the transaction commits: the ``events_committed`` signal (which wakes an in-process relay)
is sent from ``transaction.on_commit`` and so never fires for a rolled-back transaction.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

from django.db import Error, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from .conf import EventferrySettings, get_settings
from .contract import bucket_of
from .exceptions import InvalidEvent
from .models import OutboxEvent
from .naming import TableName
from .payload_schema import check_payload, schema_version
from .scheduling import Delivery, delivery
from .serialization import encode_json, encode_payload, unstorable_text
from .signals import events_committed
from .store import Dialect, dialect_for
from .store.bound import utc_param
from .store.tables import INSERT_COLUMNS, VERSIONED_INSERT_COLUMNS
from .tracing import current_traceparent
from .transactions import require_transaction

#: Column widths from the contract, counted in UTF-16 code units as NVARCHAR counts them.
TEXT_LIMITS = {"topic": 255, "aggregate_type": 255, "aggregate_id": 255,
               "partition_key": 255, "message_id": 64, "schema_version": 255}
_SCHEMA_VERSION_AT = VERSIONED_INSERT_COLUMNS.index("schema_version")


@dataclass(frozen=True)
class NewEvent:
    """An event to write with :func:`publish_events`; fields as in :func:`publish_event`."""

    topic: str
    payload: Any
    aggregate_type: str
    aggregate_id: str | int | uuid.UUID
    headers: Mapping[str, Any] | None = None
    partition_key: str | None = None
    message_id: str | None = None
    deliver_at: dt.datetime | None = None
    delay: dt.timedelta | None = None
    schema_version: str | None = None


def publish_event(
    topic: str,
    payload: Any,
    *,
    aggregate_type: str,
    aggregate_id: str | int | uuid.UUID,
    headers: Mapping[str, Any] | None = None,
    partition_key: str | None = None,
    message_id: str | None = None,
    deliver_at: dt.datetime | None = None,
    delay: dt.timedelta | None = None,
    schema_version: str | None = None,
    using: str | None = None,
) -> str:
    """Write one event to the outbox in the current transaction; return its message id.

    Must be called inside ``transaction.atomic(using=...)`` on the outbox's database
    (``EVENTFERRY["DATABASE"]`` unless ``using`` names another alias); otherwise raises
    :class:`NotInTransaction` and writes nothing. Invalid input raises
    :class:`InvalidEvent` naming the field. ``schema_version`` (default: the topic's in
    ``EVENTFERRY["TOPICS"]``) is stored with the row and sent with the message.

    ``deliver_at`` (a timezone-aware datetime) or ``delay`` (a timedelta) schedules the
    event: no relay takes it before that time, by the database's clock; a time already
    past means now. It stays the head of its aggregate meanwhile, so the aggregate's
    later events wait for it (see the publishing guide).
    """
    event = NewEvent(topic, payload, aggregate_type, aggregate_id, headers,
                     partition_key, message_id, deliver_at, delay, schema_version)
    return publish_events([event], using=using)[0]


def publish_events(
    events: Iterable[NewEvent | Mapping[str, Any]], *, using: str | None = None
) -> list[str]:
    """Write many events in one INSERT (split only where the database's parameter limit
    demands it); return their message ids in order. All are validated before any is
    written, so one bad event writes none."""
    settings = get_settings()
    alias = using or settings.database
    connection = connections[alias]
    require_transaction(alias, "publish_event()",
                        "the event commits or rolls back with your changes")
    event_list = list(events)
    prefixes = [f"events[{i}]." if len(event_list) > 1 else "" for i in range(len(event_list))]
    new_events = [_as_new_event(e, prefix)
                  for e, prefix in zip(event_list, prefixes, strict=True)]
    rows = [_row(event, prefix, settings)
            for event, prefix in zip(new_events, prefixes, strict=True)]
    if not rows:
        return []
    deliveries = [delivery(event.deliver_at, event.delay, prefix)
                  for event, prefix in zip(new_events, prefixes, strict=True)]
    message_ids = [row[0] for row in rows]
    if len(set(message_ids)) != len(message_ids):
        duplicate = next(m for m in message_ids if message_ids.count(m) > 1)
        raise InvalidEvent(f"message_id {duplicate!r} is given to more than one event.")

    dialect = _dialect(connection.vendor, settings.table_name, settings.native_json)
    if dialect.features.json_documents_only:
        _refuse_scalar_payloads(rows, prefixes)
    delivery_values = ([_delivery_params(connection, dialect, when) for when in deliveries]
                       if any(when is not None for when in deliveries) else None)
    chosen = {row[0]: prefix for row, prefix, event in zip(rows, prefixes, new_events, strict=True)
              if event.message_id is not None}
    if chosen:
        _insert_chosen_ids(connection, dialect, rows, chosen, delivery_values)
    else:
        _insert(connection, dialect, rows, delivery_values)

    transaction.on_commit(
        partial(events_committed.send, sender=OutboxEvent, message_ids=message_ids,
                topics=[row[1] for row in rows], using=alias),
        using=alias,
    )
    return message_ids


def _delivery_params(connection: BaseDatabaseWrapper, dialect: Dialect,
                     when: Delivery | None) -> list[Any]:
    at = None if when is None or when.at is None else utc_param(connection, dialect, when.at)
    return dialect.inserts.delivery_params(at, None if when is None else when.delay_ms)


def _insert(connection: BaseDatabaseWrapper, dialect: Dialect, rows: list[tuple[Any, ...]],
            deliveries: list[list[Any]] | None) -> None:
    """INSERT ``rows``; ``deliveries`` (one list of bound values a row) schedules them."""
    # Rows without a schema version leave the column out of the INSERT.
    versioned = any(row[_SCHEMA_VERSION_AT] is not None for row in rows)
    width = len(VERSIONED_INSERT_COLUMNS if versioned else INSERT_COLUMNS)
    values = [[*row[:width], *(deliveries[i] if deliveries else ())]
              for i, row in enumerate(rows)]
    # One name per bound value of a row: that is what the vendor's parameter limit counts.
    per_statement = max(1, connection.ops.bulk_batch_size(["value"] * len(values[0]), values))
    with connection.cursor() as cursor:
        for start in range(0, len(values), per_statement):
            chunk = values[start:start + per_statement]
            cursor.execute(
                dialect.inserts.insert_sql(len(chunk), scheduled=deliveries is not None,
                                           versioned=versioned),
                dialect.inserts.insert_params([value for row in chunk for value in row]),
            )


def _insert_chosen_ids(connection: BaseDatabaseWrapper, dialect: Dialect,
                       rows: list[tuple[Any, ...]], chosen: dict[str, str],
                       deliveries: list[list[Any]] | None) -> None:
    """Insert events some of whose message ids the caller chose, so may be taken.

    The INSERT runs in a savepoint: a duplicate undoes only the INSERT, and the caller's
    transaction stays usable even on PostgreSQL, which otherwise refuses every later
    statement. Which ids are taken is then read back, so no vendor's error number (23505,
    1062, 2627/2601, SQLITE_CONSTRAINT) or driver's exception class is relied on.
    Generated (uuid4) ids never collide and never pay for the savepoint.
    """
    try:
        with transaction.atomic(using=connection.alias):
            _insert(connection, dialect, rows, deliveries)
    except Error as exc:
        ids = list(chosen)
        per_query = max(1, connection.ops.bulk_batch_size(["message_id"], ids))
        try:
            with connection.cursor() as cursor:
                taken = [message_id for start in range(0, len(ids), per_query)
                         for message_id in dialect.inserts.stored_message_ids(
                             cursor, ids[start:start + per_query])]
        except Error:
            taken = []  # the transaction is gone (SQL Server with XACT_ABORT ON)
        if not taken:
            raise
        first = min(taken, key=ids.index)
        others = f" (and {len(taken) - 1} more of this batch)" if len(taken) > 1 else ""
        raise InvalidEvent(
            f"{chosen[first]}message_id {first!r} is already in the outbox{others}; "
            "nothing of this call was written."
        ) from exc


def _refuse_scalar_payloads(rows: list[tuple[Any, ...]], prefixes: list[str]) -> None:
    payload_at = INSERT_COLUMNS.index("payload")
    for row, prefix in zip(rows, prefixes, strict=True):
        if not row[payload_at].lstrip().startswith(("{", "[")):
            raise InvalidEvent(
                f"{prefix}payload: SQL Server's ISJSON check stores only a JSON object or "
                "array, not a bare string, number, boolean or null; wrap the value, e.g. "
                '{"value": ...}. Nothing of this call was written.'
            )


@lru_cache(maxsize=16)
def _dialect(vendor: str, name: TableName, native_json: bool) -> Dialect:
    return dialect_for(vendor, name, native_json=native_json)


def _as_new_event(event: NewEvent | Mapping[str, Any], prefix: str) -> NewEvent:
    where = prefix.rstrip(".") or "event"
    if isinstance(event, NewEvent):
        return event
    if isinstance(event, Mapping):
        try:
            return NewEvent(**event)
        except TypeError as exc:
            raise InvalidEvent(f"{where}: {exc}") from None
    raise InvalidEvent(
        f"{where}: expected a NewEvent or a mapping, got {type(event).__name__}."
    )


def _row(event: NewEvent, prefix: str, settings: EventferrySettings) -> tuple[Any, ...]:
    """The INSERT values for one event, in :data:`VERSIONED_INSERT_COLUMNS` order."""
    aggregate_id = event.aggregate_id
    if isinstance(aggregate_id, int | uuid.UUID) and not isinstance(aggregate_id, bool):
        aggregate_id = str(aggregate_id)
    payload = encode_payload(event.payload, f"{prefix}payload")
    limit = settings.max_payload_bytes
    # A character is at most 4 UTF-8 bytes: only count bytes when it could matter.
    if len(payload) * 4 > limit and (size := len(payload.encode("utf-8"))) > limit:
        raise InvalidEvent(
            f"{prefix}payload: {size:,} bytes as JSON, over EVENTFERRY['MAX_PAYLOAD_BYTES'] "
            f"({limit:,})."
        )
    if event.headers is None:
        headers = "{}"
    elif isinstance(event.headers, Mapping) and all(isinstance(k, str) for k in event.headers):
        headers = encode_json(dict(event.headers), f"{prefix}headers")
    else:
        raise InvalidEvent(f"{prefix}headers: must be a dict with string keys or None.")
    message_id = str(uuid.uuid4()) if event.message_id is None else event.message_id
    topic_name = _text(event.topic, f"{prefix}topic")
    topic = settings.topics.get(topic_name)
    version = schema_version(event.schema_version, topic)
    check_payload(payload, topic_name, topic, version, f"{prefix}payload")
    aggregate_id = _text(aggregate_id, f"{prefix}aggregate_id")
    return (
        _text(message_id, f"{prefix}message_id"),
        topic_name,
        _text(event.aggregate_type, f"{prefix}aggregate_type"),
        aggregate_id,
        None if event.partition_key is None
        else _text(event.partition_key, f"{prefix}partition_key"),
        payload,
        headers,
        current_traceparent(),
        bucket_of(aggregate_id),
        None if version is None else _text(version, f"{prefix}schema_version"),
    )


def _text(value: Any, field: str) -> str:
    limit = TEXT_LIMITS[field.rsplit(".", 1)[-1]]
    if not isinstance(value, str) or not value.strip():
        raise InvalidEvent(f"{field}: must be a non-empty string, got {value!r}.")
    if reason := unstorable_text(value):
        raise InvalidEvent(f"{field}: {reason}")
    # NVARCHAR(n) counts UTF-16 code units: a character outside the BMP takes two.
    if len(value) > limit or (not value.isascii() and len(value.encode("utf-16-le")) > 2 * limit):
        raise InvalidEvent(
            f"{field}: is longer than {limit} characters ({len(value)} given)."
        )
    return value
