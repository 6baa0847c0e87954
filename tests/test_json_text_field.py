"""The task results' JSON columns as JsonTextFields: the system checks pass on every
vendor, the T-SQL endpoint included (Django's JSONField failed them there, fields.E180,
stopping ``migrate``), and every value the task backend stores comes back as it went in.

The suite's own ``migrate`` (pytest-django's test database) and ``call_command`` skip the
system checks unless told otherwise, so these tests run them on purpose."""

from __future__ import annotations

import copy
import datetime as dt
import importlib
import io
from collections.abc import Iterator
from typing import Any

import pytest
from django.core import checks
from django.core.management import call_command
from django.db import connection, connections, models, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test.utils import isolate_apps
from django.utils import timezone

from eventferry_django.json_text import JsonTextField
from eventferry_django.models import TaskResultRecord, TaskResultStatus
from eventferry_django.task_messages import NotJson
from eventferry_django.task_results import TaskResultStore

#: What the task backend writes into the four columns (task_results.TaskResultStore),
#: with the awkward corners of JSON: nesting, unicode, floats, empty containers, nulls.
ARGUMENTS = {"args": [1, "two", None, 2.5, True, [], {}],
             "kwargs": {"ü": "ß ✓", "quote": "a\"b'c", "nested": {"n": [None, False]}}}
RETURN_VALUE = {"value": {"total": 12.75, "lines": ["SO-1", "SO-2"], "none": None}}


# -- the system checks -------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_check_and_migrate_run_their_system_checks_without_an_error() -> None:
    """What a user's ``manage.py check --database default`` and ``manage.py migrate``
    run, checks included, on the suite's database (the T-SQL endpoint on the mssql leg)."""
    serious = [m for m in checks.run_checks(databases=["default"]) if m.is_serious()]
    assert serious == []
    # Both raise SystemCheckError on an error.
    call_command("check", "--database", "default", stdout=io.StringIO(),
                 stderr=io.StringIO())
    call_command("migrate", skip_checks=False, verbosity=0, stdout=io.StringIO())


@pytest.mark.django_db
def test_the_results_pass_the_checks_where_the_server_reports_no_json(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As mssql-django reports a server it cannot place (on any vendor, so a real SQL
    Server 2016+ leg proves it too): JSONField fails, the results model does not."""
    monkeypatch.setattr(connection.features, "supports_json_field", False)
    with isolate_apps("tests.testapp"):
        class WithJsonField(models.Model):
            data = models.JSONField()

            class Meta:
                app_label = "testapp"

        errors = [e.id for e in WithJsonField.check(databases=["default"]) if e.is_serious()]
        assert errors == ["fields.E180"]
    assert TaskResultRecord.check(databases=["default"]) == []


def test_the_migration_changes_the_state_only() -> None:
    """Release 0.1.0's DDL made the columns; 0002 only records the new field class."""
    migration = importlib.import_module(
        "eventferry_django.migrations.0002_task_results_json_text").Migration
    [operation] = migration.operations
    assert operation.database_operations == []
    assert {op.name for op in operation.state_operations} == {
        "arguments", "worker_ids", "return_value", "errors"}
    assert all(isinstance(op.field, JsonTextField) for op in operation.state_operations)


# -- the round trip ----------------------------------------------------------------------

def create(result_id: str = "r1", **values: Any) -> TaskResultRecord:
    return TaskResultRecord.objects.create(  # type: ignore[no-any-return]
        result_id=result_id, task_path="tests.task_functions.ship", backend="default",
        queue_name="default", **{"arguments": ARGUMENTS, **values})


def stored(result_id: str, column: str) -> Any:
    """The column as the database returns it, past the field."""
    table = connection.ops.quote_name(TaskResultRecord._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {connection.ops.quote_name(column)} FROM {table} "
                       "WHERE result_id = %s", [result_id])
        return cursor.fetchone()[0]


def assert_round_trip() -> None:
    """The task backend's writes (TaskResultStore), the ORM's other ways in (update(),
    bulk_update(), values()), and SQL NULL for None, read back."""
    store = TaskResultStore("default")
    store.create(result_id="r1", task_path="tests.task_functions.ship", backend="default",
                 queue_name="default", priority=0, arguments=ARGUMENTS, run_after=None,
                 enqueued_at=timezone.now())
    row = TaskResultRecord.objects.get(result_id="r1")
    assert (row.arguments, row.worker_ids, row.errors, row.return_value) == (
        ARGUMENTS, [], [], None)
    assert stored("r1", "return_value") is None  # None is SQL NULL, as JSONField had it

    started = store.start("r1", "worker-1")
    assert started is not None and started.worker_ids == ["worker-1"]
    with transaction.atomic():
        store.succeed("r1", RETURN_VALUE["value"])
    row = TaskResultRecord.objects.get(result_id="r1")
    assert (row.status, row.worker_ids, row.return_value) == (
        TaskResultStatus.SUCCESSFUL, ["worker-1"], RETURN_VALUE)

    create("r2", worker_ids=None)
    assert store.start("r2", "worker-2") is not None
    store.fail("r2", RuntimeError("exploded ✗"))
    row = TaskResultRecord.objects.get(result_id="r2")
    [error] = row.errors
    assert error["exception_class_path"] == "builtins.RuntimeError"
    assert "exploded ✗" in error["traceback"]
    assert row.worker_ids == ["worker-2"]

    # {"value": None}: a task that returned None, distinct from no return value at all.
    TaskResultRecord.objects.filter(result_id="r2").update(return_value={"value": None})
    first, second = TaskResultRecord.objects.order_by("result_id")
    first.worker_ids, second.worker_ids = ["a", "b"], None
    TaskResultRecord.objects.bulk_update([first, second], ["worker_ids"])
    assert list(TaskResultRecord.objects.order_by("result_id").values_list(
        "worker_ids", "return_value")) == [(["a", "b"], RETURN_VALUE), (None, {"value": None})]
    assert stored("r2", "worker_ids") is None


@pytest.mark.django_db(transaction=True)
def test_every_value_the_task_backend_stores_round_trips() -> None:
    assert_round_trip()


@pytest.fixture
def server_side_binding(transactional_db: None) -> Iterator[BaseDatabaseWrapper]:
    """PostgreSQL's ``default`` for one test with ``OPTIONS["server_side_binding"]``:
    parameters bound by the server, which types them, rather than inlined by psycopg."""
    if connection.vendor != "postgresql":
        pytest.skip("a PostgreSQL option")
    original = connections["default"]
    bound = connections.create_connection("default")
    bound.settings_dict = copy.deepcopy(original.settings_dict)
    bound.settings_dict["OPTIONS"]["server_side_binding"] = True
    connections["default"] = bound
    try:
        yield bound
    finally:
        bound.close()
        connections["default"] = original


def test_values_round_trip_with_server_side_binding(
        server_side_binding: BaseDatabaseWrapper) -> None:
    assert connections["default"] is server_side_binding
    assert connection.features.uses_server_side_binding
    assert_round_trip()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("bad", [{"when": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)},
                                 [object()], {"ratio": float("nan")}, {("a", 1): "tuple key"}])
def test_a_value_json_cannot_hold_is_refused_naming_the_field(bad: Any) -> None:
    with pytest.raises(NotJson, match=r"^eventferry_django\.TaskResultRecord\.arguments "
                                      r"cannot store .*Store what JSON holds"):
        create(arguments=bad)
    assert not TaskResultRecord.objects.exists()
    create()
    with pytest.raises(NotJson, match=r"TaskResultRecord\.return_value cannot store"):
        TaskResultRecord.objects.update(return_value={"value": bad})
    assert TaskResultRecord.objects.get().return_value is None


def test_what_a_driver_returns_is_decoded() -> None:
    field = TaskResultRecord._meta.get_field("return_value")
    assert isinstance(field, JsonTextField)
    # JSON null reads back as None, as JSONField read it.
    assert field.from_db_value("null", None, connection) is None
    assert field.from_db_value(None, None, connection) is None
    assert field.from_db_value(b'{"value": [1]}', None, connection) == {"value": [1]}
    # A driver that decoded the JSON itself (psycopg's json loader) is left alone.
    assert field.from_db_value({"value": 1}, None, connection) == {"value": 1}
    with pytest.raises(NotJson, match=r"TaskResultRecord\.return_value holds 'oops'"):
        field.from_db_value("oops", None, connection)
