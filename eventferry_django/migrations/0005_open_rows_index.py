# Hand-written: swaps the outbox's head-of-aggregate index for the open-rows index that
# the chained claim walks (see ReplaceAggregateIndex). Guarded and idempotent like 0001:
# on a table that 0001 created in this release the new index exists already and the old
# one never did, so nothing happens. No model state changes: Django does not track these
# indexes. (There is no 0003: that number was never released.)
from django.db import migrations

import eventferry_django.migration_operations


class Migration(migrations.Migration):

    dependencies = [
        ("eventferry_django", "0004_inbox"),
    ]

    operations = [
        eventferry_django.migration_operations.ReplaceAggregateIndex(),
    ]
