"""The database check for a schema built by a development build (``migrate``, and
``manage.py check --database ALIAS``).

0.1.0's one ``0001_initial`` replaced the migrations of the development builds before
it (``0002_deadoutboxevent`` to ``0011_task_results``). Django ignores the rows those
left in ``django_migrations`` and sees ``0001_initial`` applied, so on a database they
built only part of, nothing would add the rest and the relay would fail later on a
missing column. This check says so, and what to do, before ``migrate`` runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import apps
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import DatabaseError, connections, router
from django.db.migrations.recorder import MigrationRecorder

from .checks import TAG

APP_LABEL = "eventferry_django"

#: The development builds' migrations after 0001, which 0.1.0's 0001_initial replaced.
PRE_RELEASE_MIGRATIONS: tuple[str, ...] = (
    "0002_deadoutboxevent", "0004_inbox", "0005_open_rows_index", "0006_outbox_autovacuum",
    "0007_closed_rows_index", "0008_schema_version", "0009_relay_registry",
    "0010_claim_buckets", "0011_task_results",
)
LAST_PRE_RELEASE = PRE_RELEASE_MIGRATIONS[-1]


@register(TAG, Tags.database)
def check_development_schema(databases: Sequence[str] | None = None,
                             **kwargs: Any) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    for alias in databases or ():
        recorded = _pre_release_rows(alias)
        if recorded:
            messages.append(_message(alias, recorded))
    return messages


def _pre_release_rows(alias: str) -> list[str]:
    """The development builds' migrations ``django_migrations`` lists on ``alias``."""
    recorder = MigrationRecorder(connections[alias])
    try:
        if not recorder.has_table():
            return []
        names = set(recorder.migration_qs.filter(app=APP_LABEL).values_list("name", flat=True))
    except DatabaseError:  # unreachable database: Django's own checks report it
        return []
    return [name for name in PRE_RELEASE_MIGRATIONS if name in names]


def _message(alias: str, recorded: list[str]) -> CheckMessage:
    prune = f"manage.py migrate {APP_LABEL} --prune --database {alias}"
    outbox = apps.get_model(APP_LABEL, "OutboxEvent")
    if len(recorded) == len(PRE_RELEASE_MIGRATIONS) or not router.allow_migrate_model(
            alias, outbox):
        # Migrated to the end (or holding no eventferry table): the schema is 0.1.0's.
        return Warning(
            f"Database {alias!r} lists {len(recorded)} migrations of a development build "
            f"of eventferry-django ({recorded[0]} .. {recorded[-1]}) in django_migrations; "
            "0.1.0's 0001_initial replaced them, and the tables they built are 0.1.0's.",
            hint=f"Run `{prune}` once to delete those rows; nothing else changes.",
            id="eventferry.W090",
        )
    return Error(
        f"Database {alias!r} was migrated by a development build of eventferry-django "
        f"only as far as {recorded[-1]}: its eventferry tables lack what the development "
        f"migrations after it added, and 0.1.0's migrations will not add it (they see "
        "0001_initial applied).",
        hint=(f"Either migrate it to the end with the development build you have "
              f"(`manage.py migrate {APP_LABEL} {LAST_PRE_RELEASE}`), then upgrade and run "
              f"`{prune}`; or, if its outbox holds nothing you need, drop the eventferry "
              f"tables and run `manage.py migrate {APP_LABEL} zero --fake --skip-checks "
              f"--database {alias}`, `{prune} --skip-checks` and `manage.py migrate "
              f"--database {alias}` (docs/upgrading.md)."),
        id="eventferry.E090",
    )
