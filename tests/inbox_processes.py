"""Consumer processes for the inbox tests (Celery workers or plain kombu consumers) on a
RabbitMQ queue of the test's own, against the test database; what they do is read back
from the trace file they share (see ``tests/inbox_worker.py``)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kombu import Connection, Queue

from benchmarks.processes import terminate
from eventferry_django.models import InboxMessage

from .amqp import AMQP_URL, require_broker, unique_name
from .relay_process import ROOT, relay_env, wait_until
from .testapp.models import Shipment


def read_trace(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


class ConsumerProcesses:
    """``count`` processes running ``command`` (``{n}`` in it replaced by the process's
    number, ``{queue}`` by the queue), each told the queue (``EVENTFERRY_TEST_QUEUE``) and
    the trace file. The processes declare the queue; it is deleted when they stop."""

    def __init__(self, directory: Path, command: list[str], *, count: int = 2) -> None:
        self.queue = self.prepare()
        self.trace = directory / "trace.jsonl"
        env = relay_env({"PUBLISHER": {
            "BACKEND": "eventferry_django.publishers.memory.InMemoryPublisher"}})
        env.update(EVENTFERRY_TEST_QUEUE=self.queue, EVENTFERRY_TEST_TRACE=str(self.trace),
                   **self.broker_env())
        self.logs = [directory / f"consumer{n}.log" for n in range(count)]
        self.processes = [
            subprocess.Popen([part.format(n=n, queue=self.queue) for part in command],
                             env=env, cwd=ROOT,
                             stdout=log.open("ab"), stderr=subprocess.STDOUT)
            for n, log in enumerate(self.logs)
        ]

    def prepare(self) -> str:
        """Check the broker; the name of the queue the processes are to read."""
        require_broker()
        return unique_name("eventferry-inbox-test")

    def broker_env(self) -> dict[str, str]:
        return {"EVENTFERRY_AMQP_URL": AMQP_URL}

    def delete_queue(self) -> None:
        with Connection(AMQP_URL) as connection:
            Queue(self.queue).bind(connection.default_channel).delete()

    def wait_ready(self) -> None:
        wait_until(lambda: sum(e["event"] == "ready" for e in read_trace(self.trace))
                   == len(self.processes) or any(p.poll() is not None for p in self.processes),
                   timeout=60, what="the consumers to start")
        assert all(p.poll() is None for p in self.processes), self.output()

    def events(self, kind: str, message_id: str) -> list[dict[str, Any]]:
        return [e for e in read_trace(self.trace)
                if e["event"] == kind and e.get("task_id") == message_id]

    def wait_finished(self, message_id: str, deliveries: int = 2) -> None:
        wait_until(lambda: len(self.events("end", message_id)) == deliveries, timeout=60,
                   what=f"{deliveries} deliveries of {message_id} to finish")

    def overlapped(self, message_id: str) -> bool:
        """Whether two deliveries of the message ran in two processes at the same time."""
        started = {e["pid"]: e["t"] for e in self.events("start", message_id)}
        finished = {e["pid"]: e["t"] for e in self.events("end", message_id)}
        if len(started) != 2 or set(finished) != set(started):
            return False
        a, b = started
        return started[a] < finished[b] and started[b] < finished[a]

    def assert_shipped_once(self, message_id: str, reference: str) -> None:
        """Two deliveries of ``message_id`` ran at once in the two processes: one shipped
        ``reference``, the other skipped it as a duplicate, and the inbox holds it once."""
        self.wait_finished(message_id)
        assert self.overlapped(message_id), self.output()
        outcomes = sorted(e["outcome"] for e in self.events("end", message_id))
        assert outcomes == ["duplicate", "handled"], self.output()
        assert len(self.events("body", message_id)) == 1
        assert list(Shipment.objects.values_list("order_reference", flat=True)) == [reference]
        assert list(InboxMessage.objects.values_list("consumer", "message_id")) == [
            ("shipping", message_id)]

    def output(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text()}" for log in self.logs
                         if log.exists())

    def stop(self) -> None:
        for process in terminate(self.processes, 20):
            process.wait(5)
        self.delete_queue()


@contextmanager
def running(directory: Path, command: list[str],
            kind: Callable[[Path, list[str]], ConsumerProcesses] = ConsumerProcesses,
            ) -> Iterator[ConsumerProcesses]:
    """Two consumer processes, ready to consume; stopped (and their queue deleted) after."""
    processes = kind(directory, command)
    try:
        processes.wait_ready()
        yield processes
    finally:
        processes.stop()
