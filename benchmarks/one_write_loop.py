#!/usr/bin/env python
"""The one-write design's statements in a loop (PostgreSQL), as a relay alone would send
them: for ``benchmarks/database_cost.py --one-write``, which measures what they cost the
database per delivered event beside a real relay's.

It checks in with the relay registry (so the harness sees it start), creates the bucket
leases and the batches in flight (docs/design/one-write.md) and takes every bucket, then
until SIGTERM, in one transaction per batch: the batch just delivered taken out of the
journal (the fence), the ack of its rows (the one write), the next claim, which reads
the same rows a relay's claim would (``ClaimSql.read``), oldest first, passing over
the aggregates of the other batch in flight (two in flight, a relay's default), and
writes nothing, and the new batch's journal row. No broker: the simulated one confirms at
once, and its CPU is not what is measured.
"""

from __future__ import annotations

import signal
import sys
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    import django

    django.setup()
    from django.db import connection, transaction

    from eventferry_django.conf import get_settings
    from eventferry_django.contract import BUCKETS, DONE, FAILED, PENDING
    from eventferry_django.store.bucket_leases import BucketLeases
    from eventferry_django.store.claim import ClaimRequest
    from eventferry_django.store.in_flight_journal import InFlightJournal
    from eventferry_django.store.registry import RelayRegistry

    stopping = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    settings = get_settings()
    instance = f"b:one-write-{uuid.uuid4().hex}"
    RelayRegistry().check_in(instance, "one-write", 60)
    leases, journal = BucketLeases(), InFlightJournal()
    schema, ops = leases.dialect.schema, leases.dialect.ops
    with connection.cursor() as cursor:
        for table in (schema.bucket_leases, schema.in_flight):
            for statement in schema.create_statements(table):
                cursor.execute(statement)
        cursor.execute(*leases.sql.seed())
    leases.take(instance, range(BUCKETS), 3600)
    claim = leases.dialect.claim
    # Holding every bucket, it reads oldest first: one window, where reading bucket by
    # bucket reads 256 (27 against 21 us of claim per event, 100,000 events).
    request = ClaimRequest(settings.batch_size, 60, max_chain=settings.max_chain,
                           expired_leases=False)
    ack = (f"UPDATE {ops.table} SET {ops.quote('status')} = {DONE}, "
           f"{ops.quote('processed_at')} = {ops.now_sql} WHERE {ops.quote('id')} = ANY(%s) "
           f"AND {ops.quote('status')} IN ({PENDING}, {FAILED})")
    # The relay's default: two batches in flight. Each transaction settles the oldest and
    # claims the next, passing over the aggregates of the other.
    in_flight: deque[tuple[int, list[Any]]] = deque()
    batches = 0
    while not stopping:
        with transaction.atomic(), connection.cursor() as cursor:
            if ops.relay_transaction_sql:
                cursor.execute(ops.relay_transaction_sql)
            if len(in_flight) == settings.batches_in_flight or (in_flight and not in_flight[-1][1]):
                batch, settled = in_flight.popleft()
                if settled:
                    rest = journal.settled(cursor, instance, batch)
                    ops.execute_often(cursor, ack, [[row[0] for row in settled]
                                                    if rest is None else rest])
            aggregates = sorted({row[4] for _, rows in in_flight for row in rows})
            claimed = claim.read(cursor, request, aggregates)
            batches += 1
            if claimed:
                journal.record(cursor, instance, batches, [row[0] for row in claimed])
            in_flight.append((batches, claimed))
        if not any(rows for _, rows in in_flight):
            in_flight.clear()
            time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
