"""OutboxTaskBackend in process: enqueue writes the task with the caller's transaction,
the runner runs it once and records its result, get_result follows the states. The
tests with real Celery workers and relays are in test_task_workers.py."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from django.core.management.base import CommandError
from django.db import transaction
from django.utils import timezone

from eventferry_django import publish_event
from eventferry_django.exceptions import InvalidEvent, NotInTransaction
from eventferry_django.models import InboxMessage, OutboxEvent, Status, TaskResultRecord
from eventferry_django.publishers.base import OutboundMessage, Outcome, Publisher, PublishResult
from eventferry_django.publishers.celery_sender import TaskCall
from eventferry_django.publishers.memory import InMemoryPublisher
from eventferry_django.publishers.task_routing import TaskRouting, route_tasks
from eventferry_django.publishers.task_runner import TaskRunnerPublisher, task_call
from eventferry_django.relay import Relay, RelayConfig
from eventferry_django.task_api import (
    PACKAGE,
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultStatus,
)
from eventferry_django.task_backend import OutboxTaskBackend
from eventferry_django.task_checks import check_options, check_task_backends
from eventferry_django.task_messages import AGGREGATE_TYPE, RUNNER_TASK, topic_for
from eventferry_django.task_runner import Outcome as RunOutcome
from eventferry_django.task_runner import run

from . import task_functions
from .testapp.models import Shipment

pytestmark = pytest.mark.django_db(transaction=True)

BACKEND = "eventferry_django.task_backend.OutboxTaskBackend"
APP = "tests.task_worker.app"


@pytest.fixture(autouse=True)
def outbox_tasks(settings: Any) -> Iterator[None]:
    settings.TASKS = {"default": {"BACKEND": BACKEND, "QUEUES": ["default", "reports"],
                                  "OPTIONS": {"celery_app": APP}}}
    yield


def only_row() -> OutboxEvent:
    [row] = OutboxEvent.objects.all()
    return row


def run_row(row: OutboxEvent, worker: str = "w1") -> RunOutcome:
    """What a worker does with the message the relay sends for ``row``."""
    return run(row.message_id, row.payload_data, worker)


# -- enqueue -------------------------------------------------------------------------------

def test_enqueue_outside_a_transaction_raises_and_writes_nothing() -> None:
    with pytest.raises(NotInTransaction, match=r"enqueue\(\) must run inside "
                       r"transaction.atomic\(using='default'\)"):
        task_functions.ship.enqueue("SO-1")
    assert not OutboxEvent.objects.exists() and not TaskResultRecord.objects.exists()


def test_enqueue_writes_one_outbox_row_and_a_ready_result_with_the_transaction() -> None:
    with transaction.atomic():
        result = task_functions.ship.enqueue("SO-1", linger=0)
    row = only_row()
    assert row.message_id == row.aggregate_id == result.id
    assert row.topic == topic_for("default") and row.aggregate_type == AGGREGATE_TYPE
    assert row.payload_data == {"task_path": "tests.task_functions.ship", "args": ["SO-1"],
                                "kwargs": {"linger": 0}, "backend": "default",
                                "queue_name": "default"}
    assert result.status == TaskResultStatus.READY
    fetched = task_functions.ship.get_result(result.id)
    assert (fetched.status, fetched.args, fetched.kwargs) == (
        TaskResultStatus.READY, ["SO-1"], {"linger": 0})


def test_a_rolled_back_enqueue_leaves_nothing() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        result = task_functions.ship.enqueue("SO-1")
        raise RuntimeError("the caller's transaction fails")
    assert not OutboxEvent.objects.exists()
    with pytest.raises(TaskResultDoesNotExist):
        task_functions.ship.get_result(result.id)


def test_autocommit_is_allowed_only_by_the_option(settings: Any) -> None:
    settings.TASKS = {"default": {"BACKEND": BACKEND, "OPTIONS": {
        "celery_app": APP, "allow_autocommit": True}}}
    result = task_functions.ship.enqueue("SO-1")
    assert only_row().message_id == result.id
    assert TaskResultRecord.objects.get().result_id == result.id


def test_arguments_that_are_not_json_are_refused_with_their_path() -> None:
    with pytest.raises(InvalidTask, match=r"kwargs\['linger'\]\[1\] is a datetime.datetime"), \
            transaction.atomic():
        task_functions.ship.enqueue("SO-1", linger=[1, timezone.now()])
    with pytest.raises(InvalidTask, match=r"args\[0\] is nan"), transaction.atomic():
        task_functions.ship.enqueue(float("nan"))
    assert not OutboxEvent.objects.exists()


def test_a_refused_task_leaves_the_callers_transaction_usable(settings: Any) -> None:
    settings.EVENTFERRY = {**settings.EVENTFERRY, "MAX_PAYLOAD_BYTES": 200}
    with transaction.atomic():
        with pytest.raises(InvalidEvent, match="MAX_PAYLOAD_BYTES"):
            task_functions.ship.enqueue("x" * 500)
        kept = task_functions.ship.enqueue("SO-1")
    assert only_row().message_id == kept.id
    assert TaskResultRecord.objects.get().result_id == kept.id


def test_priority_is_refused_and_queue_name_is_honoured() -> None:
    with pytest.raises(InvalidTask, match="priority"):
        task_functions.ship.using(priority=10)
    with pytest.raises(InvalidTask, match="Queue 'nowhere'"):
        task_functions.ship.using(queue_name="nowhere").enqueue("SO-1")
    with transaction.atomic():
        task_functions.ship.using(queue_name="reports").enqueue("SO-1")
    row = only_row()
    assert row.headers_data["task_queue"] == "reports"
    message = OutboundMessage(row.id, row.message_id, row.topic, row.aggregate_type,
                              row.aggregate_id, None, row.payload, row.headers_data)
    call = task_call(message)
    assert isinstance(call, TaskCall) and call.queue == "reports"
    assert call.name == RUNNER_TASK and call.argument == json.loads(row.payload)
    default = task_call(dataclasses.replace(message, headers={"task_queue": "default"}))
    assert isinstance(default, TaskCall) and default.queue is None  # the app's routing decides
    unknown = task_call(dataclasses.replace(message, payload='{"task_path": "no.such.task"}'))
    assert isinstance(unknown, PublishResult) and unknown.outcome == Outcome.GIVE_UP


def test_run_after_schedules_the_outbox_row() -> None:
    # Whole milliseconds: the results table keeps times to the millisecond.
    later = (timezone.now() + dt.timedelta(hours=1)).replace(microsecond=123000)
    with transaction.atomic():
        result = task_functions.ship.using(run_after=later).enqueue("SO-1")
    assert list(OutboxEvent.objects.scheduled().values_list("message_id", flat=True)) == [
        result.id]
    assert not OutboxEvent.objects.due().exists()
    assert task_functions.ship.get_result(result.id).task.run_after == later


# -- the runner ----------------------------------------------------------------------------

def test_the_runner_runs_a_task_once_and_records_its_result() -> None:
    with transaction.atomic():
        result = task_functions.ship.enqueue("SO-1")
    row = only_row()
    assert run_row(row, "w1") == RunOutcome.SUCCESSFUL
    assert run_row(row, "w2") == RunOutcome.DUPLICATE  # the relay published it twice
    assert list(Shipment.objects.values_list("order_reference", flat=True)) == ["SO-1"]
    assert InboxMessage.objects.get().message_id == result.id

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"shipped": "SO-1"}
    assert result.worker_ids == ["w1"] and result.attempts == 1
    assert result.started_at is not None and result.finished_at >= result.started_at
    assert result.errors == []


def test_a_failing_task_is_failed_with_its_traceback_and_its_writes_undone() -> None:
    with transaction.atomic():
        result = task_functions.explode.enqueue("boom")
    assert run_row(only_row()) == RunOutcome.FAILED
    assert not Shipment.objects.exists() and not InboxMessage.objects.exists()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class_path == "builtins.RuntimeError"
    assert "exploded: boom" in error.traceback and "in explode" in error.traceback
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    # Not run again: a failed Django task stays failed.
    assert run_row(only_row()) == RunOutcome.DUPLICATE


def test_a_return_value_that_is_not_json_fails_the_task() -> None:
    with transaction.atomic():
        result = task_functions.unjsonable.enqueue()
    assert run_row(only_row()) == RunOutcome.FAILED
    result.refresh()
    assert "the return value is a builtins.object" in result.errors[0].traceback


def test_context_and_async_tasks_run() -> None:
    with transaction.atomic():
        counted = task_functions.attempt_number.enqueue()
        shipped = task_functions.ship_async.enqueue("SO-async")
    for row in OutboxEvent.objects.order_by("id"):
        assert run_row(row) == RunOutcome.SUCCESSFUL
    counted.refresh()
    shipped.refresh()
    assert counted.return_value == 1
    assert shipped.return_value == "SO-async"
    assert Shipment.objects.get().order_reference == "SO-async"


def test_get_result_follows_ready_running_successful() -> None:
    with transaction.atomic():
        result = task_functions.ship.enqueue("SO-1")
    seen = []

    def record_state(**kwargs: Any) -> None:
        seen.append(task_functions.ship.get_result(result.id).status)

    from eventferry_django.task_api import task_started

    task_started.connect(record_state, weak=False)
    try:
        run_row(only_row())
    finally:
        task_started.disconnect(record_state)
    assert seen == [TaskResultStatus.RUNNING]
    assert task_functions.ship.get_result(result.id).status == TaskResultStatus.SUCCESSFUL


# -- the relay's routing -------------------------------------------------------------------

class Recording(Publisher):
    """Keeps what it was given, per instance."""

    def __init__(self) -> None:
        super().__init__()
        self.published: list[OutboundMessage] = []

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        self.published.extend(messages)
        return [PublishResult.ok() for _ in messages]


def test_routing_sends_events_to_their_publisher_and_refuses_unknown_backends() -> None:
    events, tasks = Recording(), Recording()
    routing = TaskRouting(events, {"default": tasks})
    messages = [OutboundMessage(n, f"m{n}", topic, "a", str(n), None, "{}")
                for n, topic in enumerate(["orders", topic_for("default"), "orders",
                                           topic_for("gone")])]
    results = routing.publish(messages)
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.OK, Outcome.OK,
                                            Outcome.GIVE_UP]
    assert "no OutboxTaskBackend named 'gone'" in (results[3].error or "")
    assert [m.message_id for m in events.published] == ["m0", "m2"]
    assert [m.message_id for m in tasks.published] == ["m1"]


def test_the_relay_is_built_with_task_routing_only_when_tasks_are_configured(
        settings: Any) -> None:
    routed = route_tasks(InMemoryPublisher())
    assert isinstance(routed, TaskRouting)
    assert isinstance(routed.tasks["default"], TaskRunnerPublisher)
    assert routed.tasks["default"].app_path == APP
    settings.TASKS = {"default": {"BACKEND": f"{PACKAGE}.backends.dummy.DummyBackend"}}
    assert isinstance(route_tasks(InMemoryPublisher()), InMemoryPublisher)
    # Another backend that cannot even be imported is not the relay's concern.
    settings.TASKS = {"default": {"BACKEND": BACKEND, "OPTIONS": {"celery_app": APP}},
                      "other": {"BACKEND": "nowhere.Backend"}}
    assert list(route_tasks(InMemoryPublisher()).tasks) == ["default"]  # type: ignore[attr-defined]


def test_a_task_whose_path_cannot_be_imported_goes_dead_and_reports_failed() -> None:
    with transaction.atomic():
        result = task_functions.ship.enqueue("SO-1")
        OutboxEvent.objects.update(payload=json.dumps({
            **only_row().payload_data, "task_path": "tests.task_functions.renamed"}))
    relay = Relay(RelayConfig.from_settings(until_empty=True, poll_interval=0.01),
                  publisher=route_tasks(InMemoryPublisher()))
    relay.run()
    assert only_row().status == Status.DEAD
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class_path == "eventferry_django.exceptions.TaskNotDelivered"
    assert "tests.task_functions.renamed' cannot be imported" in error.traceback


def test_events_and_tasks_share_a_transaction_and_a_relay() -> None:
    with transaction.atomic():
        publish_event("orders", {"n": 1}, aggregate_type="order", aggregate_id="1")
        task_functions.ship.enqueue("SO-1")
    assert OutboxEvent.objects.count() == 2


# -- checks --------------------------------------------------------------------------------

def test_checks_name_each_bad_option() -> None:
    messages = check_options("default", {"celery_app": "tests.nowhere.app",
                                         "database": "elsewhere", "allow_autocommit": "yes",
                                         "colour": "blue"})
    assert [m.id for m in messages] == ["eventferry.tasks.E001", "eventferry.tasks.E002",
                                        "eventferry.tasks.E003", "eventferry.tasks.E004"]
    assert "TASKS['default']['OPTIONS']['celery_app'] is 'tests.nowhere.app'" in messages[1].msg
    assert check_options("default", {"celery_app": APP}) == []
    assert OutboxTaskBackend.supports_defer and not OutboxTaskBackend.supports_priority


def test_manage_py_check_reports_bad_options_without_building_the_backend(settings: Any
                                                                          ) -> None:
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.TASKS = {"default": {"BACKEND": BACKEND, "OPTIONS": {"celery_app": "no.app"}},
                      "other": {"BACKEND": "nowhere.Backend"}}
    assert [m.id for m in check_task_backends()] == ["eventferry.tasks.E002"]
    with pytest.raises(SystemCheckError, match=r"eventferry.tasks.E002"):
        call_command("check", "--tag", "eventferry")


# -- retention and the admin ---------------------------------------------------------------

def test_outbox_purge_task_results_deletes_only_finished_old_results() -> None:
    from django.core.management import call_command

    with transaction.atomic():
        done = task_functions.ship.enqueue("SO-1")
        task_functions.ship.enqueue("SO-2")  # stays READY
    run_row(OutboxEvent.objects.get(message_id=done.id))
    out = io.StringIO()
    call_command("outbox_purge", "--task-results", "--older-than", "0s", "--dry-run",
                 stdout=out)
    assert "Would delete 1 task result(s) finished" in out.getvalue()
    assert TaskResultRecord.objects.count() == 2
    call_command("outbox_purge", "--task-results", "--older-than", "1h", stdout=out)
    assert TaskResultRecord.objects.count() == 2  # finished, but not an hour ago
    call_command("outbox_purge", "--task-results", "--older-than", "0s", stdout=out)
    assert list(TaskResultRecord.objects.values_list("status", flat=True)) == ["READY"]
    with pytest.raises(CommandError, match="pick one"):
        call_command("outbox_purge", "--task-results", "--inbox", "--older-than", "0s")


def test_the_admin_lists_results_and_shows_a_traceback(client: Any) -> None:
    from django.contrib.auth.models import User

    # Logged in once: the T-SQL endpoint cannot store a NULL last_login (engine_gaps:
    # datetimeoffset-null), as in test_admin.py.
    client.force_login(User.objects.create_superuser(
        "root", password="secret-pass-123", last_login=timezone.now()))
    admin_client = client
    with transaction.atomic():
        result = task_functions.explode.enqueue("admin")
    run_row(only_row())
    listing = admin_client.get("/admin/eventferry_django/taskresultrecord/")
    assert listing.status_code == 200
    assert result.id in listing.content.decode()
    record = TaskResultRecord.objects.get()
    page = admin_client.get(f"/admin/eventferry_django/taskresultrecord/{record.pk}/change/")
    assert page.status_code == 200
    assert "RuntimeError: exploded: admin" in page.content.decode()
