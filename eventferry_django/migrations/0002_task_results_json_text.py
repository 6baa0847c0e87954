# Hand-written, state only: the task results' JSON columns are JsonTextFields
# (eventferry_django.json_text), no longer JSONFields, whose system check fails on a SQL
# Server mssql-django cannot place (fields.E180). Nothing runs on the database: release
# 0.1.0's DDL already made these columns what JsonTextField writes to (NVARCHAR(MAX) with
# ISJSON checks, JSONB, JSON, TEXT with json_valid checks), and released DDL is frozen.
from django.db import migrations

import eventferry_django.json_text


class Migration(migrations.Migration):
    dependencies = [("eventferry_django", "0001_initial")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="taskresultrecord",
                    name="arguments",
                    field=eventferry_django.json_text.JsonTextField(verbose_name="arguments"),
                ),
                migrations.AlterField(
                    model_name="taskresultrecord",
                    name="worker_ids",
                    field=eventferry_django.json_text.JsonTextField(blank=True, null=True, verbose_name="worker ids"),
                ),
                migrations.AlterField(
                    model_name="taskresultrecord",
                    name="return_value",
                    field=eventferry_django.json_text.JsonTextField(blank=True, null=True, verbose_name="return value"),
                ),
                migrations.AlterField(
                    model_name="taskresultrecord",
                    name="errors",
                    field=eventferry_django.json_text.JsonTextField(blank=True, null=True, verbose_name="errors"),
                ),
            ],
            database_operations=[],
        ),
    ]
