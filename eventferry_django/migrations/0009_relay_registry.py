# Hand-written: the relay registry (<outbox>_relays), where running relays check in so
# that they can share the aggregates out (docs/relay.md, "Several relays"). Vendor DDL
# guarded and idempotent like 0004's; created on whichever database the router sends the
# outbox to. No model state: only the relays read and write it.
from django.db import migrations

import eventferry_django.migration_operations


class Migration(migrations.Migration):

    dependencies = [
        ("eventferry_django", "0008_schema_version"),
    ]

    operations = [
        eventferry_django.migration_operations.CreateRelayRegistry(),
    ]
