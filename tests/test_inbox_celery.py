"""InboxTask with real Celery workers: two worker processes on RabbitMQ receive the same
message at the same moment, and its side effect happens once."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

from eventferry_django.exceptions import InvalidMessage
from eventferry_django.models import InboxMessage

from .amqp import AMQP_URL
from .engine_gaps import babelfish_gap
from .inbox_processes import ConsumerProcesses, running
from .inbox_worker import ship
from .test_inbox import NOCOUNT_GAP
from .testapp.models import Shipment

pytestmark = pytest.mark.django_db(transaction=True)


#: Two Celery workers, a process each, on a queue of the test's own; the queue is in their
#: node names too, so runs side by side on one host never share a worker's control queue.
#: Heartbeats stay on: they also wake a worker's event loop, which otherwise sleeps for
#: seconds before it notices a shutdown.
WORKER = [sys.executable, "-m", "celery", "-A", "tests.inbox_worker", "worker", "--pool",
          "solo", "--loglevel", "INFO", "--without-gossip", "--without-mingle",
          "-n", "inbox{n}-{queue}@%h", "-Q", "{queue}"]


@pytest.fixture(scope="module")
def workers(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[ConsumerProcesses]:
    # Started once for the module: they only need the test database to exist.
    with running(tmp_path_factory.mktemp("celery-workers"), WORKER) as workers:
        yield workers


def deliver_twice(workers: ConsumerProcesses, task: str, payload: dict[str, Any],
                  task_id: str) -> None:
    """The same task message twice, back to back: as a relay that published it, crashed
    before recording so, and published it again would, only closer together."""
    sender = Celery(broker=AMQP_URL)
    with sender.connection_for_write() as connection:
        for _ in range(2):
            sender.send_task(task, args=[payload], task_id=task_id, queue=workers.queue,
                             connection=connection)


@babelfish_gap("locking-hints-ignored", "UPDLOCK, HOLDLOCK on the inbox probe do not serialise: the second worker fails on the unique key instead of skipping")
@pytest.mark.slow
def test_two_workers_get_the_same_message_at_once_and_ship_once(
    workers: ConsumerProcesses,
) -> None:
    message_id = str(uuid.uuid4())
    deliver_twice(workers, "tests.ship", {"reference": "SO-1", "linger": 1.0}, message_id)

    workers.wait_finished(message_id)
    # Both workers really did take the message, in two processes, at the same time...
    assert workers.overlapped(message_id), workers.output()
    # ...and the body ran once: one shipment, one inbox record.
    assert len(workers.events("body", message_id)) == 1, workers.output()
    assert list(Shipment.objects.values_list("order_reference", flat=True)) == ["SO-1"]
    assert list(InboxMessage.objects.values_list("consumer", "message_id")) == [
        ("shipping", message_id)]
    # The skipped delivery is logged by the worker that skipped it.
    assert f"shipping skipped message {message_id}: handled before" in workers.output()


@pytest.mark.slow
def test_without_the_inbox_the_same_setup_ships_twice(workers: ConsumerProcesses) -> None:
    # The control: the very same deliveries to a task without InboxTask. If this did
    # not ship twice, the test above would prove nothing.
    message_id = str(uuid.uuid4())
    deliver_twice(workers, "tests.ship_unguarded", {"reference": "SO-2", "linger": 1.0},
                  message_id)
    workers.wait_finished(message_id)
    assert workers.overlapped(message_id), workers.output()
    assert Shipment.objects.filter(order_reference="SO-2").count() == 2
    assert not InboxMessage.objects.exists()


# -- the task base in process (Celery's real tracer, through apply()) ----------------------

@NOCOUNT_GAP
def test_apply_runs_the_body_once_per_task_id() -> None:
    task_id = str(uuid.uuid4())
    ship.apply(args=[{"reference": "SO-1"}], task_id=task_id).get()
    ship.apply(args=[{"reference": "SO-1"}], task_id=task_id).get()
    ship.apply(args=[{"reference": "SO-2"}]).get()  # another message: a fresh task id
    assert sorted(Shipment.objects.values_list("order_reference", flat=True)) == [
        "SO-1", "SO-2"]
    assert InboxMessage.objects.filter(consumer="shipping").count() == 2


@NOCOUNT_GAP
def test_a_failing_body_rolls_back_its_record_so_a_retry_handles_it() -> None:
    task_id = str(uuid.uuid4())
    failed = ship.apply(args=[{"linger": "not a number", "reference": "SO-1"}],
                        task_id=task_id)
    assert failed.failed() and isinstance(failed.result, ValueError)
    assert not Shipment.objects.exists() and not InboxMessage.objects.exists()
    ship.apply(args=[{"reference": "SO-1"}], task_id=task_id).get()
    assert Shipment.objects.count() == 1


def test_calling_the_task_directly_is_refused_rather_than_unguarded() -> None:
    with pytest.raises(InvalidMessage, match=r"tests.ship was called without a task id"):
        ship({"reference": "SO-1"})
    assert not Shipment.objects.exists()
    ship.run({"reference": "SO-1"})  # the documented way around the inbox
    assert Shipment.objects.count() == 1
