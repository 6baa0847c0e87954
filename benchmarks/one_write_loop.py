#!/usr/bin/env python
"""The one-write design's statements in a loop (PostgreSQL), as a relay alone would send
them: for ``benchmarks/database_cost.py --one-write``, which measures what they cost the
database per delivered event beside a real relay's.

It checks in with the relay registry (so the harness sees it start), creates and seeds
the bucket leases (docs/design/one-write.md) and takes every bucket, then until SIGTERM,
in one transaction per batch: the fence on the buckets of the batch just delivered, the
ack of its rows (the one write), and the next claim, which reads the same rows a relay's
claim would (``PostgresqlClaim.claim_sql(read_only=True)``), passing over the aggregates
of the other batch in flight (two in flight, a relay's default), and writes nothing. No
broker: the simulated one confirms at once, and its CPU is not what is measured.
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
    from eventferry_django.contract import BUCKETS, DONE, FAILED, PENDING, bucket_of
    from eventferry_django.store.bucket_leases import BucketLeases
    from eventferry_django.store.claim import ClaimRequest
    from eventferry_django.store.registry import RelayRegistry
    from eventferry_django.store.sql import bind

    stopping = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    settings = get_settings()
    instance = f"b:one-write-{uuid.uuid4().hex}"
    RelayRegistry().check_in(instance, "one-write", 60)
    leases = BucketLeases()
    schema, ops = leases.dialect.schema, leases.dialect.ops
    with connection.cursor() as cursor:
        for statement in schema.create_statements(schema.bucket_leases):
            cursor.execute(statement)
        cursor.execute(*leases.sql.seed())
    epochs = leases.take(instance, range(BUCKETS), 3600)
    claim = leases.dialect.claim
    request = ClaimRequest(settings.batch_size, 60, max_chain=settings.max_chain,
                           expired_leases=False)
    sql, params = claim.claim_sql(read_only=True)
    slots = claim.slots(request)
    ack = (f"UPDATE {ops.table} SET {ops.quote('status')} = {DONE}, "
           f"{ops.quote('processed_at')} = {ops.now_sql} WHERE {ops.quote('id')} = ANY(%s) "
           f"AND {ops.quote('status')} IN ({PENDING}, {FAILED})")
    # The relay's default: two batches in flight. Each transaction settles the oldest and
    # claims the next, passing over the first rows of the other's aggregates.
    in_flight: deque[list[Any]] = deque()
    while not stopping:
        with transaction.atomic(), connection.cursor() as cursor:
            if ops.relay_transaction_sql:
                cursor.execute(ops.relay_transaction_sql)
            if len(in_flight) == settings.batches_in_flight or (in_flight and not in_flight[-1]):
                settled = in_flight.popleft()
                if settled:
                    buckets = {bucket_of(row[4]) for row in settled}
                    held = leases.fenced(cursor, instance, {b: epochs[b] for b in buckets})
                    ids = [row[0] for row in settled if bucket_of(row[4]) in held]
                    ops.execute_often(cursor, ack, [ids])
            heads: dict[str, int] = {}
            for batch in in_flight:
                for row in batch:
                    heads[row[4]] = min(heads.get(row[4], row[0]), row[0])
            claimed = ops.execute_often(
                cursor, sql, bind(params, **slots, in_flight=sorted(heads.values()))).fetchall()
            in_flight.append(claimed)
        if not any(in_flight):
            in_flight.clear()
            time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
