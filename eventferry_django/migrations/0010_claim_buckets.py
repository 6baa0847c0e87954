# Hand-written: adds the outbox's nullable bucket column (the aggregate's bucket, by which
# relays share the work; issue 27) and the index of each bucket's fresh rows, which a
# relay's claim reads. Guarded and idempotent like 0008: SQL Server and MariaDB/MySQL look
# the column and the index up in their catalogs, PostgreSQL uses IF [NOT] EXISTS, and on
# SQLite (the column alone: its relays do not share by bucket), whose ALTER TABLE cannot
# be guarded, the operation reads the table's columns first. Rows written before it keep
# a null bucket, which every relay claims. The model's field is added by the state
# operation beside it.
from django.db import migrations, models

import eventferry_django.migration_operations


class Migration(migrations.Migration):

    dependencies = [
        ("eventferry_django", "0009_relay_registry"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                eventferry_django.migration_operations.AddClaimBuckets(),
            ],
            state_operations=[
                migrations.AddField(
                    model_name="outboxevent",
                    name="bucket",
                    field=models.SmallIntegerField(
                        blank=True, editable=False, null=True, verbose_name="bucket"
                    ),
                ),
            ],
        ),
    ]
