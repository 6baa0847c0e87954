# Hand-written: the 0.1.0 schema. Each table is created by release 0.1.0's frozen vendor
# DDL (RunReleasedDdl: guarded and idempotent, so running it where a DBA already created
# part of a table repairs what is missing); the CreateModels only record the models in
# Django's migration state. Released migrations are never edited: a schema change is a
# new release's migration and frozen files (docs/development.md, "Changing the schema").
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
                        ("schema_version", models.CharField(blank=True, max_length=255, null=True, verbose_name="schema version")),
                        ("bucket", models.SmallIntegerField(blank=True, editable=False, null=True, verbose_name="bucket")),
                    ],
                    options={
                        "verbose_name": "outbox event",
                        "verbose_name_plural": "outbox events",
                        # Follows EVENTFERRY's TABLE/SCHEMA exactly as the model does.
                        "db_table": eventferry_django.conf.orm_db_table(),
                    },
                ),
                migrations.CreateModel(
                    name="DeadOutboxEvent",
                    fields=[],
                    options={
                        "verbose_name": "dead outbox event",
                        "verbose_name_plural": "dead outbox events",
                        "permissions": (("redrive_deadoutboxevent", "Can redrive dead outbox events"),),
                        "proxy": True,
                        "indexes": [],
                        "constraints": [],
                    },
                    bases=("eventferry_django.outboxevent",),
                ),
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
                migrations.CreateModel(
                    name="TaskResultRecord",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("result_id", models.CharField(max_length=64, unique=True, verbose_name="result id")),
                        ("task_path", models.CharField(max_length=255, verbose_name="task")),
                        ("backend", models.CharField(max_length=255, verbose_name="backend")),
                        ("queue_name", models.CharField(max_length=255, verbose_name="queue")),
                        ("priority", models.IntegerField(default=0, verbose_name="priority")),
                        ("status", models.CharField(choices=[("READY", "ready"), ("RUNNING", "running"), ("SUCCESSFUL", "successful"), ("FAILED", "failed")], default="READY", max_length=64, verbose_name="status")),
                        ("arguments", models.JSONField(verbose_name="arguments")),
                        ("run_after", models.DateTimeField(blank=True, null=True, verbose_name="run after")),
                        ("enqueued_at", models.DateTimeField(default=django.utils.timezone.now, verbose_name="enqueued at")),
                        ("started_at", models.DateTimeField(blank=True, null=True, verbose_name="started at")),
                        ("last_attempted_at", models.DateTimeField(blank=True, null=True, verbose_name="last attempted at")),
                        ("finished_at", models.DateTimeField(blank=True, null=True, verbose_name="finished at")),
                        ("attempts", models.IntegerField(default=0, verbose_name="attempts")),
                        ("worker_ids", models.JSONField(blank=True, null=True, verbose_name="worker ids")),
                        ("return_value", models.JSONField(blank=True, null=True, verbose_name="return value")),
                        ("errors", models.JSONField(blank=True, null=True, verbose_name="errors")),
                    ],
                    options={
                        "verbose_name": "task result",
                        "verbose_name_plural": "task results",
                        # Follows EVENTFERRY's TABLE/SCHEMA exactly as the model does.
                        "db_table": eventferry_django.conf.orm_db_table("task_results"),
                    },
                ),
            ],
        ),
        eventferry_django.migration_operations.RunReleasedDdl(release="0.1.0", table="outbox"),
        eventferry_django.migration_operations.RunReleasedDdl(release="0.1.0", table="inbox"),
        eventferry_django.migration_operations.RunReleasedDdl(release="0.1.0", table="relays"),
        eventferry_django.migration_operations.RunReleasedDdl(release="0.1.0", table="task_results"),
    ]
