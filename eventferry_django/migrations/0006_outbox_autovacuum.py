# Hand-written: gives an existing PostgreSQL outbox the per-table autovacuum settings of
# a queue table, which 0001 now sets in its CREATE TABLE (see TuneOutboxAutovacuum and
# PostgresqlDialect.AUTOVACUUM). Setting storage parameters is idempotent, so running it
# on a table 0001 created in this release changes nothing; other vendors have nothing to
# tune. Reversed, the parameters are reset to the server's defaults. No model state.
from django.db import migrations

import eventferry_django.migration_operations


class Migration(migrations.Migration):

    dependencies = [
        ("eventferry_django", "0005_open_rows_index"),
    ]

    operations = [
        eventferry_django.migration_operations.TuneOutboxAutovacuum(),
    ]
