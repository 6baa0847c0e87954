"""Private PostgreSQL, MariaDB and RabbitMQ servers for the soak, which restarts them.

The machine's shared servers (PostgreSQL 5432, MariaDB 3306, RabbitMQ 5672) serve other
people's tests and must never be restarted; each server here has its own port and its own
data directory under ``base``, and is started from the Debian binaries::

    with PrivateRabbitMQ(base / "rabbitmq") as broker:
        broker.restart()          # a graceful stop, then a start; its durable queues survive

A database "restart" is a crash: PostgreSQL stops with ``-m immediate`` and MariaDB takes
SIGKILL, so each comes back through its own crash recovery, as after a power cut.
Ports are taken below Linux's ephemeral range (32768+), where an outgoing connection of
another process could already hold one.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

PG_BIN = Path(os.environ.get("EVENTFERRY_SOAK_PG_BIN", "/usr/lib/postgresql/15/bin"))
RABBITMQ_BIN = Path(os.environ.get("EVENTFERRY_SOAK_RABBITMQ_BIN", "/usr/lib/rabbitmq/bin"))
START_TIMEOUT = 120.0


def free_port(avoid: set[int] | None = None) -> int:
    """A port nothing listens on, between 20,000 and 32,000 (and not ``avoid``)."""
    taken = avoid or set()
    for _ in range(200):
        port = random.randrange(20_000, 32_000)
        if port in taken or port + 1 in taken:
            continue
        with socket.socket() as probe, socket.socket() as neighbour:
            try:
                probe.bind(("127.0.0.1", port))
                neighbour.bind(("127.0.0.1", port + 1))  # RabbitMQ's distribution port
            except OSError:
                continue
        return port
    raise RuntimeError("no free port between 20,000 and 32,000")


def wait_for_port(port: int, timeout: float = START_TIMEOUT, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"nothing listens on {host}:{port} after {timeout:.0f} s") from None
            time.sleep(0.1)


#: First starts tried, each on a port picked anew, while another process takes the port.
PORT_ATTEMPTS = 5


class PrivateServer:
    """One server process of our own: ``start``, ``stop``, ``restart``, cleaned up on exit."""

    name = "server"
    #: Where it listens, and the network namespace it runs in (benchmarks/far.py puts
    #: the servers in one of their own, behind a delay); the machine's loopback else.
    host = "127.0.0.1"
    netns: str | None = None

    def __init__(self, base: Path) -> None:
        self.base = base
        #: Keep ``base`` (data and log) once the server is stopped.
        self.keep = False
        self.port = free_port()
        self.log = base / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PrivateServer:
        if self.base.exists():
            shutil.rmtree(self.base)
        self.base.mkdir(parents=True)
        self.initialise()
        try:
            self._start_on_a_free_port()
        except BaseException:
            self.stop(crash=True)
            raise
        return self

    def _start_on_a_free_port(self) -> None:
        """The first start. The port was free when :func:`free_port` picked it, but
        another process may bind it before the server does (seconds later, after
        initdb): where the server says so (:meth:`port_taken`), it starts again on a port
        picked anew. A restart keeps its port: its clients know it."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            logged = self.log.stat().st_size if self.log.exists() else 0
            try:
                self.start()
                return
            except RuntimeError:
                if attempt == PORT_ATTEMPTS or not self.port_taken(since=logged):
                    raise
            self.port = free_port()

    def port_taken(self, since: int) -> bool:
        """Whether the server's log after byte ``since`` says another process had its port."""
        if not self.log.exists():
            return False
        with self.log.open("rb") as log:
            log.seek(since)
            return b"Address already in use" in log.read()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop(crash=True)
        if not self.keep:
            shutil.rmtree(self.base, ignore_errors=True)

    def initialise(self) -> None:
        """Create the data directory (once, before the first start)."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self, crash: bool = False) -> None:
        raise NotImplementedError

    def restart(self) -> float:
        """Stop and start again; returns the seconds the server was unreachable."""
        started = time.monotonic()
        self.stop(crash=True)
        self.start()
        return time.monotonic() - started

    def _spawn(self, argv: list[str], env: dict[str, str] | None = None,
               user: str | None = None) -> subprocess.Popen[bytes]:
        if user and os.geteuid() == 0:
            argv = ["runuser", "-u", user, "--", *argv]
        argv = self.in_netns(argv)
        with self.log.open("ab") as out:
            # A session of its own: a Ctrl-C meant for the soak must not reach the server.
            return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    cwd=self.base, start_new_session=True)

    def in_netns(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else argv

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(30)
        self.process = None


class PrivatePostgres(PrivateServer):
    """PostgreSQL 15 with trust authentication for ``postgres`` on 127.0.0.1."""

    name = "PostgreSQL"
    user = "postgres"

    @property
    def data(self) -> Path:
        return self.base / "data"

    def _run_as(self) -> str | None:
        # initdb refuses to run as root: the data directory belongs to postgres then.
        return self.user if os.geteuid() == 0 else None

    def initialise(self) -> None:
        owner = self._run_as()
        if owner:
            entry = pwd.getpwnam(owner)
            os.chown(self.base, entry.pw_uid, entry.pw_gid)
        argv = [str(PG_BIN / "initdb"), "-D", str(self.data), "-U", "postgres",
                "--auth=trust", "--no-sync", "-E", "UTF8"]
        if owner:
            argv = ["runuser", "-u", owner, "--", *argv]
        subprocess.run(argv, check=True, capture_output=True, cwd=self.base)

    def start(self) -> None:
        # Ours, left by a server of ours that is gone: its "ready" must not be read as the
        # new one's.
        (self.data / "postmaster.pid").unlink(missing_ok=True)
        self.process = self._spawn(
            [str(PG_BIN / "postgres"), "-D", str(self.data), "-p", str(self.port),
             "-c", f"listen_addresses={self.host}", "-c", f"unix_socket_directories={self.base}",
             "-c", "max_connections=100", "-c", "shared_buffers=128MB"],
            user=self._run_as())
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not self._ready():
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited; see {self.log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not start; see {self.log}")
            time.sleep(0.1)

    def _ready(self) -> bool:
        """Whether our postmaster says it accepts connections (the status line of its pid
        file). Not a probe of the port: that can reach another server which took the
        port first, while ours exits for want of it (a CI failure: "ready", then
        "connection refused" once the other server had gone)."""
        try:
            lines = (self.data / "postmaster.pid").read_text().splitlines()
        except FileNotFoundError:
            return False
        return len(lines) >= 8 and lines[7].strip() == "ready"

    def stop(self, crash: bool = False) -> None:
        if self.process is None or self.process.poll() is not None:
            self.process = None
            return
        # SIGQUIT is `pg_ctl stop -m immediate`: no checkpoint, crash recovery at start.
        # The postmaster's own pid: under runuser, self.process is runuser.
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGQUIT if crash else signal.SIGINT)
        try:
            self.process.wait(60)
        finally:
            self._kill()


class PrivateMariaDB(PrivateServer):
    """MariaDB with ``root`` and no password on 127.0.0.1."""

    name = "MariaDB"

    @property
    def data(self) -> Path:
        return self.base / "data"

    def _options(self) -> list[str]:
        return ["--no-defaults", f"--datadir={self.data}", f"--socket={self.base}/mysqld.sock",
                f"--port={self.port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
                f"--pid-file={self.base}/mysqld.pid", f"--user={pwd.getpwuid(os.geteuid())[0]}"]

    def initialise(self) -> None:
        subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={self.data}",
             "--auth-root-authentication-method=normal", "--skip-test-db",
             f"--user={pwd.getpwuid(os.geteuid())[0]}"],
            check=True, capture_output=True, cwd=self.base)

    def start(self) -> None:
        self.process = self._spawn(
            ["mariadbd", *self._options(), "--innodb-buffer-pool-size=256M",
             "--max-connections=200", "--innodb-log-file-size=256M"])
        wait_for_port(self.port)

    def stop(self, crash: bool = False) -> None:
        if self.process is None or self.process.poll() is not None:
            self.process = None
            return
        self.process.send_signal(signal.SIGKILL if crash else signal.SIGTERM)
        try:
            self.process.wait(60)
        finally:
            self._kill()


class PrivateRabbitMQ(PrivateServer):
    """A RabbitMQ node of its own (node name, AMQP and distribution ports, data, logs).

    The Debian ``rabbitmq-server`` wrapper switches to the shared node's user and its
    ``/etc/rabbitmq`` files; the scripts under ``/usr/lib/rabbitmq/bin`` take everything
    from the environment built here instead. A restart is graceful (``rabbitmqctl
    stop``): messages the broker confirmed are on disk either way, and a graceful stop
    keeps the restart's length predictable.
    """

    name = "RabbitMQ"

    def __init__(self, base: Path) -> None:
        super().__init__(base)
        self.node = f"efsoak{self.port}@localhost"

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@{self.host}:{self.port}//"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        for key in [k for k in env if k.startswith(("RABBITMQ_", "ERL_"))]:
            del env[key]
        env.update(
            HOME=str(self.base),  # its own Erlang cookie
            RABBITMQ_NODENAME=self.node,
            RABBITMQ_NODE_IP_ADDRESS=self.host,
            RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.port + 1),
            RABBITMQ_MNESIA_BASE=str(self.base / "mnesia"),
            RABBITMQ_LOG_BASE=str(self.base / "log"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.base / "enabled_plugins"),
            RABBITMQ_CONFIG_FILE=str(self.base / "rabbitmq"),
            RABBITMQ_PID_FILE=str(self.base / "rabbitmq.pid"),
            RABBITMQ_CONF_ENV_FILE=str(self.base / "rabbitmq-env.conf"),
            ERL_EPMD_ADDRESS="127.0.0.1",
        )
        return env

    def initialise(self) -> None:
        (self.base / "enabled_plugins").write_text("[].\n")  # no management listener
        (self.base / "rabbitmq.conf").write_text("")
        (self.base / "rabbitmq-env.conf").write_text("")

    def _ctl(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(self.in_netns([str(RABBITMQ_BIN / "rabbitmqctl"), "-n",
                                             self.node, *args]),
                              env=self._env(), capture_output=True, cwd=self.base)

    def start(self) -> None:
        self.process = self._spawn([str(RABBITMQ_BIN / "rabbitmq-server")], env=self._env())
        wait_for_port(self.port, host=self.host)
        result = self._ctl("wait", str(self.base / "rabbitmq.pid"), "--timeout",
                           str(int(START_TIMEOUT)))
        if result.returncode != 0:
            raise RuntimeError(f"RabbitMQ did not start: {result.stderr.decode()[-500:]}")

    def stop(self, crash: bool = False) -> None:
        if self.process is None or self.process.poll() is not None:
            self._kill_node()
            self.process = None
            return
        self._ctl("stop", str(self.base / "rabbitmq.pid"))
        try:
            self.process.wait(60)
        finally:
            self._kill_node()
            self._kill()

    def _kill_node(self) -> None:
        """SIGKILL the Erlang VM if it outlived ``rabbitmqctl stop`` (a node that never
        finished starting cannot be stopped that way)."""
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int((self.base / "rabbitmq.pid").read_text().split()[0])
            # Only our node's VM: a pid in a stale file may belong to anyone by now.
            if self.node.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
