"""OutboxTaskBackend end to end: real ``outbox_relay`` processes deliver task rows over
RabbitMQ to a real Celery worker (``celery -A tests.task_worker worker``, which finds the
runner by autodiscovery), on the test database. Effects are counted in the database."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone
from kombu import Connection, Queue

from eventferry_django import publish_event
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.task_api import TaskResultDoesNotExist, TaskResultStatus, task_backends

from . import task_functions
from .amqp import AMQP_URL
from .inbox_processes import ConsumerProcesses, read_trace
from .relay_process import db_address, start_relay, through_port, wait_until
from .tcp_proxy import TcpProxy
from .testapp.models import Shipment

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

WORKER = [sys.executable, "-m", "celery", "-A", "tests.task_worker", "worker", "--pool",
          "solo", "--loglevel", "INFO", "--without-gossip", "--without-mingle",
          "-n", "tasks{n}-{queue}@%h", "-Q", "{queue},{queue}-reports"]


def tasks_setting(queue: str) -> dict[str, Any]:
    """TASKS of the test process, the relays and the worker: the test's queue is the
    Celery app's default (Django's "default"), and "<queue>-reports" a second one."""
    return {"default": {"BACKEND": "eventferry_django.task_backend.OutboxTaskBackend",
                        "QUEUES": ["default", f"{queue}-reports"],
                        "OPTIONS": {"celery_app": "tests.task_worker.app"}}}
FILE_PUBLISHER = "tests.process_publishers.FilePublisher"
REDIS_URL = os.environ.get("EVENTFERRY_REDIS_URL", "redis://127.0.0.1:6379/0")


class TaskWorkers(ConsumerProcesses):
    def prepare(self) -> str:
        queue = super().prepare()
        # The relays (which send through tests.task_worker.app) and the worker read them.
        os.environ.update(EVENTFERRY_TEST_TASKS=json.dumps(tasks_setting(queue)),
                          EVENTFERRY_TEST_QUEUE=queue)
        return queue

    def delete_queue(self) -> None:
        super().delete_queue()
        with Connection(AMQP_URL) as connection:
            Queue(f"{self.queue}-reports").bind(connection.default_channel).delete()

    def queues(self, result_id: str) -> list[str]:
        return [e["queue"] for e in read_trace(self.trace)
                if e["event"] == "end" and e.get("task_id") == result_id]

    def outcomes(self, result_id: str) -> list[str]:
        return sorted(e["outcome"] for e in read_trace(self.trace)
                      if e["event"] == "end" and e.get("task_id") == result_id)


@contextmanager
def environment(**values: str) -> Iterator[None]:
    """``os.environ`` with ``values`` for what starts meanwhile (relays and workers read
    their settings from it), then as it was; what the block itself sets is undone too."""
    saved = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


class RedisTaskWorkers(TaskWorkers):
    """Workers whose Celery app (tests.task_worker) talks to Redis instead of RabbitMQ."""

    def broker_env(self) -> dict[str, str]:
        return {"EVENTFERRY_AMQP_URL": REDIS_URL}

    def delete_queue(self) -> None:
        with Connection(REDIS_URL) as connection:
            for name in (self.queue, f"{self.queue}-reports"):
                Queue(name).bind(connection.default_channel).delete()


def own_workers(directory: Path, count: int, **env: str) -> tuple[TaskWorkers, str]:
    """Workers on a queue of their own (their environment plus ``env``), and that queue;
    the module's worker keeps its own."""
    directory.mkdir()
    with environment(**env):
        workers = TaskWorkers(directory, WORKER, count=count)
        return workers, os.environ["EVENTFERRY_TEST_QUEUE"]


@pytest.fixture(scope="module")
def worker(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[TaskWorkers]:
    saved = {k: os.environ.get(k) for k in ("EVENTFERRY_TEST_TASKS", "EVENTFERRY_TEST_QUEUE")}
    workers = TaskWorkers(tmp_path_factory.mktemp("task-worker"), WORKER, count=1)
    try:
        workers.wait_ready()
        yield workers
    finally:
        workers.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(autouse=True)
def outbox_tasks(settings: Any, worker: TaskWorkers) -> None:
    settings.TASKS = tasks_setting(worker.queue)


def relay_settings(out: Path, **options: Any) -> dict[str, Any]:
    return {"CLAIM_TIMEOUT": 1.5, "PUBLISHER": {
        "BACKEND": FILE_PUBLISHER, "OPTIONS": {"path": str(out), **options}}}


def status_of(result_id: str) -> str:
    return str(task_backends["default"].get_result(result_id).status)


def wait_for_status(result: Any, status: str, worker: TaskWorkers, timeout: float = 60
                    ) -> None:
    try:
        wait_until(lambda: status_of(result.id) == status, timeout=timeout,
                   what=f"task {result.id} to be {status}")
    except AssertionError:
        raise AssertionError(worker.output()) from None


def test_a_rolled_back_task_never_runs_and_a_committed_one_runs_once(
        worker: TaskWorkers, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        rolled_back = task_functions.ship.enqueue("SO-rolled-back")
        raise RuntimeError("the view failed")
    with transaction.atomic():
        committed = task_functions.ship.enqueue("SO-committed")
    relay = start_relay(relay_settings(tmp_path / "events.jsonl"), "--until-empty",
                        log=tmp_path / "relay.log")
    assert relay.wait(60) == 0, (tmp_path / "relay.log").read_text()
    wait_for_status(committed, TaskResultStatus.SUCCESSFUL, worker)

    committed.refresh()
    assert committed.return_value == {"shipped": "SO-committed"}
    assert len(committed.worker_ids) == 1 and committed.worker_ids[0].startswith("tasks0-")
    assert list(Shipment.objects.values_list("order_reference", flat=True)) == ["SO-committed"]
    with pytest.raises(TaskResultDoesNotExist):
        task_functions.ship.get_result(rolled_back.id)
    # The worker traces the run after its transaction committed: wait for the line.
    wait_until(lambda: worker.outcomes(committed.id), what="the worker's trace")
    assert worker.outcomes(committed.id) == ["successful"]
    assert worker.outcomes(rolled_back.id) == []


def test_a_relay_killed_after_publishing_and_before_settling_runs_the_task_once(
        worker: TaskWorkers, tmp_path: Path) -> None:
    out = tmp_path / "events.jsonl"
    with transaction.atomic():
        result = task_functions.ship.enqueue("SO-once")
        # In the same claim, after the task: the events' publisher hangs on it, so the
        # relay has handed the task to RabbitMQ and never gets to mark it done.
        publish_event("stall", {}, aggregate_type="a", aggregate_id="1")
    victim = start_relay(relay_settings(out, stall_topic="stall"), "--batch-size", "10",
                         "--batches-in-flight", "1", log=tmp_path / "victim.log")
    try:
        wait_for_status(result, TaskResultStatus.SUCCESSFUL, worker)
        wait_until(lambda: out.exists(), what="the victim to reach the stalling event")
        row = OutboxEvent.objects.get(message_id=result.id)
        # Delivered, never settled.
        assert row.status == Status.PENDING and OutboxEvent.objects.in_flight().filter(id=row.id)
    finally:
        # Killed however the test ends: a relay left running would claim the next
        # tests' rows.
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
    time.sleep(1.6)  # the victim's lease runs out

    survivor = start_relay(relay_settings(out), "--until-empty", log=tmp_path / "survivor.log")
    assert survivor.wait(60) == 0, (tmp_path / "survivor.log").read_text()
    # The task was published twice; the worker ran it once and skipped it once.
    wait_until(lambda: len(worker.outcomes(result.id)) == 2, timeout=60,
               what="the second delivery to be handled")
    assert worker.outcomes(result.id) == ["duplicate", "successful"], worker.output()
    assert Shipment.objects.filter(order_reference="SO-once").count() == 1
    row.refresh_from_db()
    assert (row.status, row.attempts) == (Status.DONE, 1)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.attempts == 1


def test_run_after_is_honoured(worker: TaskWorkers, tmp_path: Path) -> None:
    # Whole milliseconds: the results table keeps times to the millisecond.
    run_after = (timezone.now() + dt.timedelta(seconds=3)).replace(microsecond=0)
    with transaction.atomic():
        result = task_functions.ship.using(run_after=run_after).enqueue("SO-later")
    relay = start_relay(relay_settings(tmp_path / "events.jsonl"), "--poll-interval", "0.2",
                        log=tmp_path / "relay.log")
    try:
        time.sleep(1.5)
        assert status_of(result.id) == TaskResultStatus.READY
        assert not Shipment.objects.exists()
        wait_for_status(result, TaskResultStatus.SUCCESSFUL, worker)
    finally:
        relay.send_signal(signal.SIGTERM)
        relay.wait(30)
    result.refresh()
    assert result.started_at >= run_after


def test_a_failing_task_is_failed_with_its_traceback(worker: TaskWorkers, tmp_path: Path
                                                     ) -> None:
    with transaction.atomic():
        result = task_functions.explode.enqueue("in-a-worker")
    relay = start_relay(relay_settings(tmp_path / "events.jsonl"), "--until-empty",
                        log=tmp_path / "relay.log")
    assert relay.wait(60) == 0
    wait_for_status(result, TaskResultStatus.FAILED, worker)
    result.refresh()
    [error] = result.errors
    assert error.exception_class_path == "builtins.RuntimeError"
    assert "RuntimeError: exploded: in-a-worker" in error.traceback
    assert 'tests/task_functions.py", line' in error.traceback
    assert not Shipment.objects.exists()  # its write rolled back with it


def test_get_result_follows_ready_running_successful(worker: TaskWorkers, tmp_path: Path
                                                     ) -> None:
    with transaction.atomic():
        result = task_functions.ship.enqueue("SO-slow", linger=2.0)
    seen = [status_of(result.id)]
    relay = start_relay(relay_settings(tmp_path / "events.jsonl"), "--until-empty",
                        log=tmp_path / "relay.log")
    deadline = time.monotonic() + 60
    while seen[-1] != TaskResultStatus.SUCCESSFUL and time.monotonic() < deadline:
        if (status := status_of(result.id)) != seen[-1]:
            seen.append(status)
        time.sleep(0.05)
    assert relay.wait(60) == 0
    assert seen == [TaskResultStatus.READY, TaskResultStatus.RUNNING,
                    TaskResultStatus.SUCCESSFUL], worker.output()
    result.refresh()
    assert result.started_at < result.finished_at
    assert (result.finished_at - result.started_at).total_seconds() >= 2.0


def test_queue_name_is_the_celery_queue(worker: TaskWorkers, tmp_path: Path) -> None:
    reports = f"{worker.queue}-reports"
    with transaction.atomic():
        routed = task_functions.ship.using(queue_name=reports).enqueue("SO-reports")
        default = task_functions.ship.enqueue("SO-default")
    relay = start_relay(relay_settings(tmp_path / "events.jsonl"), "--until-empty",
                        log=tmp_path / "relay.log")
    assert relay.wait(60) == 0
    for result in (routed, default):
        wait_for_status(result, TaskResultStatus.SUCCESSFUL, worker)
        wait_until(lambda r=result: worker.queues(r.id), what="the worker's trace")
    # "default" leaves the Celery app's routing to choose: its task_default_queue.
    assert worker.queues(routed.id) == [reports]
    assert worker.queues(default.id) == [worker.queue]


@pytest.mark.skipif(connection.vendor == "sqlite", reason="no network between a worker and SQLite")
def test_a_worker_that_cannot_reach_the_database_runs_the_task_once_it_is_back(
        worker: TaskWorkers, tmp_path: Path) -> None:
    """The runner cannot even mark the task RUNNING: the message is sent again (same id)
    until the database answers, and the task then runs once."""
    with TcpProxy(*db_address()) as proxy:
        # A worker of its own, reaching the database through the proxy; the relay below
        # sends to its queue and reaches the database directly.
        cut_off, queue = own_workers(tmp_path / "cut-off", 1, **through_port(proxy.port))
        try:
            cut_off.wait_ready()
            proxy.cut()
            with transaction.atomic():
                result = task_functions.ship.enqueue("SO-outage")
            with environment(EVENTFERRY_TEST_QUEUE=queue):
                relay = start_relay(relay_settings(tmp_path / "events.jsonl"), "--until-empty",
                                    log=tmp_path / "relay.log")
            assert relay.wait(60) == 0
            wait_until(lambda: "Retry in" in cut_off.output(), timeout=30,
                       what="the worker to retry")
            assert status_of(result.id) == TaskResultStatus.READY
            proxy.restore()
            wait_for_status(result, TaskResultStatus.SUCCESSFUL, cut_off)
        finally:
            cut_off.stop()
    assert Shipment.objects.filter(order_reference="SO-outage").count() == 1
    result.refresh()
    assert result.attempts == 1


def test_a_worker_killed_mid_task_leaves_it_to_another_which_runs_it_once(
        worker: TaskWorkers, tmp_path: Path) -> None:
    """acks_late: the message of a task whose worker died is delivered again; the dead
    worker's writes never committed, so the effect happens once, by the second worker."""
    pair, queue = own_workers(tmp_path / "pair", 2)
    try:
        pair.wait_ready()
        with transaction.atomic():
            # Killed while it lingers: three seconds were once over before the relay
            # had exited on a loaded machine (the T-SQL leg of CI), and the test waited
            # for a RUNNING that had come and gone.
            result = task_functions.ship_slowly_the_first_time.enqueue("SO-survives",
                                                                       linger=120.0)
        with environment(EVENTFERRY_TEST_QUEUE=queue):
            relay = start_relay(relay_settings(tmp_path / "events.jsonl"), "--until-empty",
                                log=tmp_path / "relay.log")
        assert relay.wait(60) == 0
        wait_for_status(result, TaskResultStatus.RUNNING, pair)
        [first] = pair.events("start", result.id)
        victim = next(p for p in pair.processes if p.pid == first["pid"])
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        # The other worker takes the message back from RabbitMQ and runs the task anew.
        wait_for_status(result, TaskResultStatus.SUCCESSFUL, pair, timeout=90)
    finally:
        pair.stop()
    assert Shipment.objects.filter(order_reference="SO-survives").count() == 1
    result.refresh()
    assert result.attempts == 2 and len(set(result.worker_ids)) == 2
    [shipment] = Shipment.objects.all()
    assert shipment.handled_by != str(first["pid"])


def test_a_committed_task_runs_once_through_celery_on_redis(
        worker: TaskWorkers, tmp_path: Path) -> None:
    """The same delivery with the Celery app on Redis, the broker most Django + Celery
    shops run: the relay sends through the app's Redis connection, a worker on Redis runs
    the task, and a second publication of it (a relay that never settled) is skipped."""
    (tmp_path / "redis").mkdir()
    with environment(EVENTFERRY_AMQP_URL=REDIS_URL):
        on_redis = RedisTaskWorkers(tmp_path / "redis", WORKER, count=1)
        queue = os.environ["EVENTFERRY_TEST_QUEUE"]
    try:
        on_redis.wait_ready()
        with transaction.atomic():
            result = task_functions.ship.enqueue("SO-redis")
        with environment(EVENTFERRY_TEST_QUEUE=queue, EVENTFERRY_AMQP_URL=REDIS_URL):
            relay = start_relay(relay_settings(tmp_path / "events.jsonl"), "--until-empty",
                                log=tmp_path / "relay.log")
            assert relay.wait(60) == 0, (tmp_path / "relay.log").read_text()
            wait_for_status(result, TaskResultStatus.SUCCESSFUL, on_redis)
            # Published again, as after a relay crash: the runner skips it.
            OutboxEvent.objects.filter(message_id=result.id).update(
                status=Status.PENDING, processed_at=None)
            again = start_relay(relay_settings(tmp_path / "events.jsonl"), "--until-empty",
                                log=tmp_path / "again.log")
            assert again.wait(60) == 0, (tmp_path / "again.log").read_text()
        wait_until(lambda: len(on_redis.outcomes(result.id)) == 2, timeout=60,
                   what="the second delivery to be handled")
        assert on_redis.outcomes(result.id) == ["duplicate", "successful"], on_redis.output()
    finally:
        on_redis.stop()
    assert Shipment.objects.filter(order_reference="SO-redis").count() == 1
