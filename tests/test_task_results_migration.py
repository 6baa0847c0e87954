"""The Django tasks' results table beside the outbox, created by guarded vendor DDL
(release 0.1.0's, frozen in released_sql/, pinned by the golden files of
test_released_ddl.py), printed by ``outbox_sql --task-results``, and mapped by the model."""

from __future__ import annotations

import io

import pytest
import sqlglot
from django.core.management import call_command
from django.db import connection
from sqlglot import exp

from eventferry_django.ddl import create_statements, released
from eventferry_django.models import TaskResultRecord
from eventferry_django.naming import TableName
from eventferry_django.store.tables import TASK_RESULT_COLUMNS

from . import introspection
from .engine_gaps import babelfish_gap

RESULTS = TableName("outbox").task_results

SYS_INDEXES_GAP = babelfish_gap(
    "sys-indexes-names", "sys.indexes.name is not the created index name (guarded DDL re-runs)")


def run_ddl(statements: list[str]) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def results_exist() -> bool:
    return RESULTS.table in connection.introspection.table_names()


@SYS_INDEXES_GAP
@pytest.mark.django_db(transaction=True)
def test_the_results_table_is_created_guarded_and_dropped_backwards() -> None:
    info = introspection.describe(connection, RESULTS)
    assert [name for name, _, _ in info.columns] == [c.name for c in TASK_RESULT_COLUMNS]
    assert [name for name, _, nullable in info.columns if nullable] == [
        c.name for c in TASK_RESULT_COLUMNS if c.nullable]
    assert f"IX_{RESULTS.table}_status_finished_at" in info.indexes

    call_command("migrate", "eventferry_django", "zero", verbosity=0)
    assert not results_exist()
    call_command("migrate", "eventferry_django", verbosity=0)
    # Once more by hand (guarded): nothing changes, the outbox is untouched.
    run_ddl(create_statements(connection.vendor, "task_results"))
    assert results_exist()


@pytest.mark.django_db(transaction=True)
def test_the_model_reads_and_writes_the_vendor_table() -> None:
    TaskResultRecord.objects.create(
        result_id="r1", task_path="a.b", backend="default", queue_name="default",
        arguments={"args": [1], "kwargs": {}}, worker_ids=["w"], errors=[],
        return_value={"value": [1, "two"]})
    row = TaskResultRecord.objects.get()
    assert (row.status, row.priority, row.attempts) == ("READY", 0, 0)
    assert row.return_value == {"value": [1, "two"]} and row.arguments["args"] == [1]


def test_outbox_sql_prints_the_results_table_beside_its_outbox() -> None:
    out = io.StringIO()
    call_command("outbox_sql", "--vendor", "microsoft", "--schema", "messaging", "--table",
                 "events", "--task-results", stdout=out)
    assert "IF OBJECT_ID(N'[messaging].[events_task_results]', N'U') IS NULL" in out.getvalue()
    out = io.StringIO()
    call_command("outbox_sql", "--vendor", "postgresql", "--task-results", "--reverse",
                 stdout=out)
    assert out.getvalue().strip() == 'DROP TABLE IF EXISTS "outbox_task_results";'


@pytest.mark.parametrize("native_json", [False, True])
def test_tsql_results_table_parses(native_json: bool) -> None:
    [batch] = released("0.1.0", "task_results", "microsoft", schema="messaging",
                       native_json=native_json)
    [block] = sqlglot.parse(batch, read="tsql")
    assert isinstance(block, exp.IfBlock)
    assert not [n for n in block.walk() if isinstance(n, exp.Command)], "unparsed T-SQL"
    create = block.find(exp.Create)
    assert create is not None and "[messaging].[outbox_task_results]" in create.sql("tsql")
    [drop] = released("0.1.0", "task_results", "microsoft", forwards=False)
    assert isinstance(sqlglot.parse_one(drop, read="tsql"), exp.Drop)
