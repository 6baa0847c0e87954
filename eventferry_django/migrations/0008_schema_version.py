# Hand-written: adds the outbox's nullable schema_version column (the version of the
# payload's schema an event was written with; issue 19). Guarded and idempotent like
# 0005-0007: SQL Server and MariaDB/MySQL look the column up in their catalogs,
# PostgreSQL uses ADD/DROP COLUMN IF [NOT] EXISTS, and on SQLite, whose ALTER TABLE
# cannot be guarded, the operation reads the table's columns first. A nullable column
# without a default is a change of the catalog only: no vendor rewrites the table. The
# model's field is added by the state operation beside it.
from django.db import migrations, models

import eventferry_django.migration_operations


class Migration(migrations.Migration):

    dependencies = [
        ("eventferry_django", "0007_closed_rows_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                eventferry_django.migration_operations.AddSchemaVersionColumn(),
            ],
            state_operations=[
                migrations.AddField(
                    model_name="outboxevent",
                    name="schema_version",
                    field=models.CharField(
                        blank=True, max_length=255, null=True, verbose_name="schema version"
                    ),
                ),
            ],
        ),
    ]
