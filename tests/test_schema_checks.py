"""A database a development build migrated is told what to do by a check, before
``migrate`` runs, not by a traceback later."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder

from eventferry_django.schema_checks import (
    APP_LABEL,
    PRE_RELEASE_MIGRATIONS,
    check_development_schema,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def recorder() -> Iterator[MigrationRecorder]:
    recorder = MigrationRecorder(connection)
    try:
        yield recorder
    finally:
        recorder.migration_qs.filter(app=APP_LABEL, name__in=PRE_RELEASE_MIGRATIONS).delete()


def record(recorder: MigrationRecorder, names: tuple[str, ...]) -> None:
    for name in names:
        recorder.record_applied(APP_LABEL, name)


def test_a_database_0_1_0_migrated_has_nothing_to_say() -> None:
    assert check_development_schema(databases=["default"]) == []
    # Without databases (plain `manage.py check`) the check reads none.
    assert check_development_schema() == []


def test_a_database_migrated_to_the_end_by_a_development_build_is_told_to_prune(
        recorder: MigrationRecorder) -> None:
    record(recorder, PRE_RELEASE_MIGRATIONS)
    [warning] = check_development_schema(databases=["default"])
    assert warning.id == "eventferry.W090"
    assert "9 migrations of a development build" in warning.msg
    assert "0002_deadoutboxevent .. 0011_task_results" in warning.msg
    assert warning.hint == ("Run `manage.py migrate eventferry_django --prune --database "
                            "default` once to delete those rows; nothing else changes.")

    # The command it names clears it.
    call_command("migrate", APP_LABEL, prune=True, verbosity=0, stdout=io.StringIO())
    assert check_development_schema(databases=["default"]) == []
    # What remains is the app's own migrations (0001_initial and those after it).
    shipped = {name for app, name in MigrationLoader(connection).disk_migrations
               if app == APP_LABEL}
    assert set(recorder.migration_qs.filter(app=APP_LABEL).values_list("name", flat=True)
               ) == shipped


def test_a_database_a_development_build_migrated_part_way_stops_migrate(
        recorder: MigrationRecorder) -> None:
    record(recorder, PRE_RELEASE_MIGRATIONS[:5])  # as far as 0007_closed_rows_index
    [error] = check_development_schema(databases=["default"])
    assert error.id == "eventferry.E090"
    assert "only as far as 0007_closed_rows_index" in error.msg
    assert "`manage.py migrate eventferry_django 0011_task_results`" in error.hint
    with pytest.raises(SystemCheckError, match=r"eventferry\.E090"):
        call_command("migrate", skip_checks=False, verbosity=0, stdout=io.StringIO())
