"""A PgBouncer of a test's own in front of the test PostgreSQL, in transaction pooling
mode: each transaction gets whichever server session is free, so nothing that outlives
a transaction (a prepared statement, a LISTEN, a session setting) can be relied on.

Debian's ``pgbouncer`` package (``make pgbouncer`` installs it); a test that needs one
fails naming the package where it is missing, never skips.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.servers import free_port, wait_for_port

from .relay_process import db_address

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


class PgBouncer:
    """``pgbouncer`` on a free port of 127.0.0.1, with ``server_sessions`` server
    sessions at most per database and user: fewer than its clients, so their transactions
    take turns on the same sessions."""

    def __init__(self, server_sessions: int = 1) -> None:
        if not os.access(PGBOUNCER, os.X_OK):
            raise AssertionError("pgbouncer is missing: install Debian's pgbouncer package "
                                 "(make pgbouncer)")
        # Its own directory under /tmp: run as root, pgbouncer must run as postgres
        # (it refuses root), who cannot reach pytest's private directories.
        self.directory = Path(tempfile.mkdtemp(prefix="eventferry-pgbouncer-"))
        self.user = ["-u", "postgres"] if os.geteuid() == 0 else []
        if self.user:
            shutil.chown(self.directory, "postgres")
        self.directory.chmod(0o755)
        self.port = free_port()
        host, port = db_address()
        self.config = self.directory / "pgbouncer.ini"
        self.config.write_text(
            "[databases]\n"
            f"* = host={host} port={port} user=postgres\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            "auth_type = any\npool_mode = transaction\n"
            f"default_pool_size = {server_sessions}\nmax_client_conn = 200\n"
            # Django and psycopg send these at connection; PgBouncer would refuse them.
            "ignore_startup_parameters = extra_float_digits,options\n"
            f"logfile = {self.directory / 'pgbouncer.log'}\n")
        self.config.chmod(0o644)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PgBouncer:
        self.process = subprocess.Popen([PGBOUNCER, *self.user, str(self.config)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        wait_for_port(self.port, timeout=30)
        return self

    def stop(self) -> None:
        """Stop at once, closing its server sessions (the test database is dropped
        after the test, which a session left open would refuse)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # immediate shutdown
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        shutil.rmtree(self.directory, ignore_errors=True)

    def log(self) -> str:
        path = self.directory / "pgbouncer.log"
        return path.read_text() if path.exists() else ""


@contextmanager
def running_pgbouncer(server_sessions: int = 1) -> Iterator[PgBouncer]:
    bouncer = PgBouncer(server_sessions).start()
    try:
        yield bouncer
    finally:
        bouncer.stop()
