# Hand-written: the inbox table is created by vendor DDL (CreateInboxTable); the
# CreateModel only records the model in Django's migration state. Guarded and idempotent
# like 0001: running it where a DBA already created the table repairs what is missing.
import django.utils.timezone
from django.db import migrations, models

import eventferry_django.conf
import eventferry_django.migration_operations


class Migration(migrations.Migration):

    dependencies = [
        ("eventferry_django", "0002_deadoutboxevent"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="InboxMessage",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("consumer", models.CharField(max_length=255, verbose_name="consumer")),
                        ("message_id", models.CharField(max_length=64, verbose_name="message id")),
                        ("handled_at", models.DateTimeField(default=django.utils.timezone.now, verbose_name="handled at")),
                    ],
                    options={
                        "verbose_name": "inbox message",
                        "verbose_name_plural": "inbox messages",
                        # Follows EVENTFERRY's INBOX_TABLE/SCHEMA exactly as the model does.
                        "db_table": eventferry_django.conf.orm_db_table("inbox"),
                        "unique_together": {("consumer", "message_id")},
                    },
                ),
            ],
        ),
        eventferry_django.migration_operations.CreateInboxTable(),
    ]
