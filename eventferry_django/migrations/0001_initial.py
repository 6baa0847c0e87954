# Hand-written: the table is created by vendor DDL (CreateOutboxTable); the CreateModel
# only records the model in Django's migration state. Released migrations are never
# edited; changes get a new migration.
import django.utils.timezone
from django.db import migrations, models

import eventferry_django.conf
import eventferry_django.migration_operations


class Migration(migrations.Migration):
    initial = True

    dependencies: list[tuple[str, str]] = []

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="OutboxEvent",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("message_id", models.CharField(max_length=64, unique=True, verbose_name="message id")),
                        ("topic", models.CharField(max_length=255, verbose_name="topic")),
                        ("aggregate_type", models.CharField(max_length=255, verbose_name="aggregate type")),
                        ("aggregate_id", models.CharField(max_length=255, verbose_name="aggregate id")),
                        ("partition_key", models.CharField(blank=True, max_length=255, null=True, verbose_name="partition key")),
                        ("payload", models.TextField(verbose_name="payload")),
                        ("headers", models.TextField(default="{}", verbose_name="headers")),
                        ("trace_id", models.CharField(blank=True, max_length=255, null=True, verbose_name="trace id")),
                        ("status", models.SmallIntegerField(choices=[(0, "pending"), (1, "claimed"), (2, "done"), (3, "failed"), (4, "dead")], default=0, verbose_name="status")),
                        ("attempts", models.IntegerField(default=0, verbose_name="attempts")),
                        ("claimed_at", models.DateTimeField(blank=True, null=True, verbose_name="claimed at")),
                        ("next_retry_at", models.DateTimeField(blank=True, null=True, verbose_name="next retry at")),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now, verbose_name="created at")),
                        ("processed_at", models.DateTimeField(blank=True, null=True, verbose_name="processed at")),
                        ("last_error", models.CharField(blank=True, max_length=4000, null=True, verbose_name="last error")),
                    ],
                    options={
                        "verbose_name": "outbox event",
                        "verbose_name_plural": "outbox events",
                        # Follows EVENTFERRY's TABLE/SCHEMA exactly as the model does.
                        "db_table": eventferry_django.conf.orm_db_table(),
                    },
                ),
            ],
        ),
        eventferry_django.migration_operations.CreateOutboxTable(),
    ]
