# Hand-written: release 0.2.0's schema, for the relay that writes once per event
# (docs/design/one-write.md). It runs release 0.2.0's frozen vendor DDL (RunReleasedDdl:
# guarded and idempotent, so running it again, or after a DBA ran part of it, repairs
# what is missing):
#   - buckets: the bucket leases beside the outbox (<outbox>_buckets), which say which
#     relay holds each of the 256 buckets until when, seeded with their 256 rows (only
#     those missing);
#   - in_flight: the batches in flight beside the outbox (<outbox>_in_flight), the
#     journal a relay writes with each claim instead of marking the rows claimed;
#   - outbox: rows a 0.1.0 relay left claimed (status 1) handed back as pending, with no
#     attempt counted, and status 1 refused from then on by CK_<outbox>_claimed_needs_0_2
#     (on SQLite two triggers of that name): a 0.1.0 relay still running fails its every
#     claim with that name and publishes nothing, where it would publish beside the
#     0.2.0 relays, which cannot see its claims.
# Backwards it drops the two tables and the refusal; the rows stay pending. No model
# state changes: the two tables have no models (like the relay registry), and Django
# does not track the constraint. Released migrations are never edited
# (docs/development.md, "Changing the schema").
from django.db import migrations

import eventferry_django.migration_operations


class Migration(migrations.Migration):
    dependencies = [("eventferry_django", "0002_task_results_json_text")]

    operations = [
        eventferry_django.migration_operations.RunReleasedDdl(release="0.2.0", table="buckets"),
        eventferry_django.migration_operations.RunReleasedDdl(release="0.2.0", table="in_flight"),
        eventferry_django.migration_operations.RunReleasedDdl(release="0.2.0", table="outbox"),
    ]
