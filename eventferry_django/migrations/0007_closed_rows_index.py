# Hand-written: swaps the outbox's unfiltered retention index IX_<t>_done_processed_at
# for IX_<t>_closed_rows, the same keys filtered on the closed statuses (2, 4), so the
# claim's open-status scans and probes can never be planned on it (issue 22: after a
# restart left the statistics stale, PostgreSQL walked it for every claim). Migration
# 0001 keeps creating the released index; this one replaces it, on upgraded and new
# installs alike. Guarded and idempotent like 0005; nothing happens on MariaDB/MySQL,
# which have no filtered indexes (their claim names its indexes instead). No model state.
from django.db import migrations

import eventferry_django.migration_operations


class Migration(migrations.Migration):

    dependencies = [
        ("eventferry_django", "0006_outbox_autovacuum"),
    ]

    operations = [
        eventferry_django.migration_operations.ReplaceRetentionIndex(),
    ]
