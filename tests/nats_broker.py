"""NATS JetStream for the tests: the shared server (``EVENTFERRY_NATS_URL``, default
127.0.0.1:4222), streams of a test's own, and private servers a test may stop.

Every test skips, saying why, when nats-py is not installed or no server answers.
nats-py is asyncio; each helper call here runs on a fresh event loop
(``asyncio.run``) with a connection of its own, so the tests stay synchronous.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from .relay_process import wait_until

NATS_URL = os.environ.get("EVENTFERRY_NATS_URL", "nats://127.0.0.1:4222")
T = TypeVar("T")


def nats() -> Any:
    return pytest.importorskip("nats", reason="nats-py is not installed (the [nats] extra)")


def on_server(url: str, work: Callable[[Any], Awaitable[T]]) -> T:
    """``work(client)`` on a fresh connection to ``url``, closed after."""

    async def run() -> T:
        client = await nats().connect(url, allow_reconnect=False, connect_timeout=2,
                                      max_reconnect_attempts=1)
        try:
            return await work(client)
        finally:
            await client.close()

    return asyncio.run(run())


def require_nats(url: str = NATS_URL) -> str:
    """``url`` when a NATS server with JetStream answers there; otherwise skip."""
    nats()

    async def account(client: Any) -> Any:
        return await client.jetstream().account_info()

    try:
        on_server(url, account)
    except Exception as exc:
        pytest.skip(f"no NATS server with JetStream answers at {url} ({exc!r}); start one "
                    "with `nats-server -js`")
    return url


def unique_name(prefix: str = "EVENTFERRY") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12].upper()}"


class Stream:
    """A JetStream stream of a test's own on ``url``, taking ``<name>.>``; deleted by
    :meth:`delete`."""

    def __init__(self, url: str, *, duplicate_window: float = 120, **config: Any) -> None:
        self.url = url
        self.name = unique_name()
        self.prefix = self.name.lower()
        self.subjects = config.pop("subjects", [f"{self.prefix}.>"])

        async def add(client: Any) -> None:
            await client.jetstream().add_stream(name=self.name, subjects=self.subjects,
                                                duplicate_window=duplicate_window, **config)

        on_server(url, add)

    def count(self) -> int:
        async def info(client: Any) -> int:
            return int((await client.jetstream().stream_info(self.name)).state.messages)

        return on_server(self.url, info)

    def messages(self) -> list[Any]:
        """Every message in the stream, in stream order, as nats-py's ``RawStreamMsg``
        (``subject``, ``headers``, ``data``)."""

        async def read(client: Any) -> list[Any]:
            js = client.jetstream()
            last = (await js.stream_info(self.name)).state.last_seq
            return [await js.get_msg(self.name, seq) for seq in range(1, last + 1)]

        return on_server(self.url, read)

    def delete(self) -> None:
        async def remove(client: Any) -> None:
            await client.jetstream().delete_stream(self.name)

        on_server(self.url, remove)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrivateServer:
    """A ``nats-server`` with JetStream of a test's own, on a free port, storing its
    streams in files under ``directory`` so that they survive :meth:`stop` and
    :meth:`start`. Configured by a file, so that :meth:`stop_jetstream` can reload it."""

    def __init__(self, directory: Path) -> None:
        binary = shutil.which("nats-server")
        if binary is None:
            pytest.skip("no nats-server on PATH to start a private server with")
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.store = directory / "store"
        self.config = directory / "nats-server.conf"
        self.command = [binary, "-c", str(self.config)]
        self.url = f"nats://127.0.0.1:{self.port}"
        self.log = directory / "nats-server.log"
        self.process: subprocess.Popen[bytes] | None = None

    def _write_config(self, *, jetstream: bool) -> None:
        store = json.dumps(str(self.store))
        self.config.write_text(f"listen: 127.0.0.1:{self.port}\n" + (
            f"jetstream {{ store_dir: {store} }}\n" if jetstream else "jetstream: disabled\n"))

    def start(self) -> None:
        self._write_config(jetstream=True)
        self.process = subprocess.Popen(self.command, stdout=self.log.open("ab"),
                                        stderr=subprocess.STDOUT)
        wait_until(self._answers, timeout=20, what=f"nats-server at {self.url}")

    def stop_jetstream(self) -> None:
        """Reload the server with JetStream disabled (until the next :meth:`start`), as a
        stopping server is for a moment: connections stay open, and a stream's subjects
        get "no responders"."""
        assert self.process is not None, "start() the server first"
        reloads = self._reloads()
        self._write_config(jetstream=False)
        self.process.send_signal(signal.SIGHUP)
        wait_until(lambda: self._reloads() > reloads, timeout=20,
                   what=f"nats-server at {self.url} to reload without JetStream")

    def _reloads(self) -> int:
        return self.log.read_text(errors="replace").count("Reloaded server configuration")

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.terminate()
            process.wait(20)
