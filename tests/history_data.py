"""A deterministic outbox history for the Spark pipeline's tests: 10,000 rows over
several topics and days, closed and open, old and recent."""

from __future__ import annotations

import datetime as dt
import json
import random
from dataclasses import dataclass

from django.db import connection

from eventferry_django.models import OutboxEvent, Status
from eventferry_django.store.closed_rows import ARCHIVE_COLUMNS, TIMESTAMP_COLUMNS
from eventferry_django.store.outbox import OutboxStore

TOPICS = ("order.created", "order.paid", "invoice.sent", "odd/topic: ü=1")
ERRORS = ("NOT_ROUTED: no queue bound", "406 PRECONDITION_FAILED - message too large",
          "consumer rejected: schema v3 expected")


@dataclass(frozen=True)
class History:
    now: dt.datetime
    old_done: int
    old_dead: int
    recent: int
    open_rows: int

    @property
    def total(self) -> int:
        return self.old_done + self.old_dead + self.recent + self.open_rows


def seed(*, old_done: int = 9_000, old_dead: int = 400, recent: int = 300,
         open_each: int = 100, seed_value: int = 8) -> History:
    """Old closed rows processed 2 to 5 days ago (so ``--older-than 1d`` takes them all),
    recent done rows from the last hour, and pending, scheduled and failed rows."""
    rng = random.Random(seed_value)
    now = OutboxStore().utc_now().replace(microsecond=0)
    rows: list[OutboxEvent] = []

    def add(status: Status, processed_at: dt.datetime | None, **fields: object) -> None:
        n = len(rows)
        latency = dt.timedelta(milliseconds=rng.choice((3, 8, 20, 45, 120, 900, 4000))
                               + rng.randrange(0, 50))
        created_at = (processed_at or now) - latency
        rows.append(OutboxEvent(
            message_id=f"m-{n:05d}", topic=TOPICS[n % len(TOPICS)], aggregate_type="order",
            aggregate_id=f"agg-{n % 211}", partition_key=None if n % 3 else f"pk-{n % 7}",
            payload=json.dumps({"n": n, "total": f"{n}.50", "items": [n % 5, "ü"]}),
            headers=json.dumps({"x-tenant": f"t{n % 4}"}), trace_id=None, status=status,
            created_at=created_at, processed_at=processed_at, **fields,
        ))

    for _ in range(old_done):
        processed = now - dt.timedelta(days=2, seconds=rng.randrange(0, 3 * 86_400),
                                       milliseconds=rng.randrange(0, 1000))
        add(Status.DONE, processed, attempts=rng.choice((0, 0, 0, 0, 1, 1, 2, 3)))
    for _ in range(old_dead):
        processed = now - dt.timedelta(days=2, seconds=rng.randrange(0, 3 * 86_400),
                                       milliseconds=rng.randrange(0, 1000))
        add(Status.DEAD, processed, attempts=5, last_error=rng.choice(ERRORS))
    for _ in range(recent):
        add(Status.DONE, now - dt.timedelta(seconds=rng.randrange(1, 3600)), attempts=0)
    for _ in range(open_each):
        add(Status.PENDING, None)
        add(Status.PENDING, None, next_retry_at=now + dt.timedelta(hours=1))  # scheduled
        add(Status.FAILED, None, attempts=1, next_retry_at=now + dt.timedelta(hours=1),
            last_error="retry later")
    rng.shuffle(rows)  # ids interleave statuses, days and topics, as in a real table
    insert(rows)
    return History(now, old_done, old_dead, recent, 3 * open_each)


def insert(rows: list[OutboxEvent], per_statement: int = 500) -> None:
    """Insert rows with every column given, in id order. Not bulk_create: on PostgreSQL
    it binds the text payload as text[] into a jsonb column."""
    store = OutboxStore()
    dialect, ops = store.dialect, connection.ops
    columns = [c for c in ARCHIVE_COLUMNS if c != "id"]
    placeholders = "(" + ", ".join(
        dialect.inserts.json_placeholder if c in ("payload", "headers") else "%s" for c in columns
    ) + ")"
    # No more parameters a statement than the database takes (SQL Server: 2,100).
    per_statement = max(1, min(per_statement, ops.bulk_batch_size(columns, rows)))
    for start in range(0, len(rows), per_statement):
        chunk = rows[start:start + per_statement]
        params = [
            ops.adapt_datetimefield_value(getattr(row, c)) if c in TIMESTAMP_COLUMNS
            else getattr(row, c)
            for row in chunk for c in columns
        ]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {dialect.table} ({dialect.ops.columns(columns)}) VALUES "
                + ", ".join([placeholders] * len(chunk)),
                params,
            )


def archived_candidates(cutoff: dt.datetime) -> dict[int, tuple[str, int]]:
    """id -> (message_id, status) of the rows an archive with this cutoff (both closed
    statuses) must take, read with the ORM."""
    return {
        row_id: (message_id, status)
        for row_id, message_id, status in OutboxEvent.objects.filter(
            status__in=(Status.DONE, Status.DEAD), processed_at__lt=cutoff,
        ).values_list("id", "message_id", "status")
    }
