"""``publish_event()``: write an event into the outbox inside the caller's transaction.

The row commits or rolls back with the caller's own changes. Nothing else happens until
the transaction commits: the ``events_committed`` signal (which wakes an in-process relay)
is sent from ``transaction.on_commit`` and so never fires for a rolled-back transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

from django.db import connections, transaction

from .conf import EventferrySettings, get_settings
from .exceptions import InvalidEvent
from .models import OutboxEvent
from .naming import TableName
from .serialization import encode_json
from .signals import events_committed
from .store import Dialect, dialect_for
from .store.base import INSERT_COLUMNS
from .tracing import current_traceparent
from .transactions import require_transaction

#: Column widths from the contract, counted in UTF-16 code units as NVARCHAR counts them.
TEXT_LIMITS = {"topic": 255, "aggregate_type": 255, "aggregate_id": 255,
               "partition_key": 255, "message_id": 64}


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


def publish_event(
    topic: str,
    payload: Any,
    *,
    aggregate_type: str,
    aggregate_id: str | int | uuid.UUID,
    headers: Mapping[str, Any] | None = None,
    partition_key: str | None = None,
    message_id: str | None = None,
    using: str | None = None,
) -> str:
    """Write one event to the outbox in the current transaction; return its message id.

    Must be called inside ``transaction.atomic(using=...)`` on the outbox's database
    (``EVENTFERRY["DATABASE"]`` unless ``using`` names another alias); otherwise raises
    :class:`NotInTransaction` and writes nothing. Invalid input raises
    :class:`InvalidEvent` naming the field.
    """
    event = NewEvent(topic, payload, aggregate_type, aggregate_id, headers,
                     partition_key, message_id)
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
    rows = [_row(_as_new_event(e, prefix), prefix, settings)
            for e, prefix in zip(event_list, prefixes, strict=True)]
    if not rows:
        return []
    message_ids = [row[0] for row in rows]
    if len(set(message_ids)) != len(message_ids):
        duplicate = next(m for m in message_ids if message_ids.count(m) > 1)
        raise InvalidEvent(f"message_id {duplicate!r} is given to more than one event.")

    dialect = _dialect(connection.vendor, settings.table_name, settings.native_json)
    per_statement = max(1, connection.ops.bulk_batch_size(list(INSERT_COLUMNS), rows))
    with connection.cursor() as cursor:
        for start in range(0, len(rows), per_statement):
            chunk = rows[start:start + per_statement]
            cursor.execute(
                dialect.insert_sql(len(chunk)),
                dialect.insert_params([value for row in chunk for value in row]),
            )

    transaction.on_commit(
        partial(events_committed.send, sender=OutboxEvent, message_ids=message_ids,
                topics=[row[1] for row in rows], using=alias),
        using=alias,
    )
    return message_ids


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
    """The INSERT values for one event, in :data:`INSERT_COLUMNS` order."""
    aggregate_id = event.aggregate_id
    if isinstance(aggregate_id, int | uuid.UUID) and not isinstance(aggregate_id, bool):
        aggregate_id = str(aggregate_id)
    payload = encode_json(event.payload, f"{prefix}payload")
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
    return (
        _text(message_id, f"{prefix}message_id"),
        _text(event.topic, f"{prefix}topic"),
        _text(event.aggregate_type, f"{prefix}aggregate_type"),
        _text(aggregate_id, f"{prefix}aggregate_id"),
        None if event.partition_key is None
        else _text(event.partition_key, f"{prefix}partition_key"),
        payload,
        headers,
        current_traceparent(),
    )


def _text(value: Any, field: str) -> str:
    limit = TEXT_LIMITS[field.rsplit(".", 1)[-1]]
    if not isinstance(value, str) or not value.strip():
        raise InvalidEvent(f"{field}: must be a non-empty string, got {value!r}.")
    # NVARCHAR(n) counts UTF-16 code units: a character outside the BMP takes two.
    if len(value) > limit or (not value.isascii() and len(value.encode("utf-16-le")) > 2 * limit):
        raise InvalidEvent(
            f"{field}: is longer than {limit} characters ({len(value)} given)."
        )
    return value
