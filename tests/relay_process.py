"""Start ``manage.py outbox_relay`` as a real process against the test database."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.db import DatabaseError, connection, transaction

ROOT = Path(__file__).resolve().parent.parent


def relay_env(eventferry: dict[str, Any], db_port: int | None = None, *,
              root: Path = ROOT) -> dict[str, str]:
    """The environment of a relay process of the tree at ``root`` (this one by default)
    on the test database; ``db_port`` (a proxy's on 127.0.0.1) stands between it and the
    database where given."""
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(root),
        DJANGO_SETTINGS_MODULE="tests.settings",
        EVENTFERRY_TEST_DB_NAME=str(connection.settings_dict["NAME"]),
        EVENTFERRY_TEST_SETTINGS=json.dumps(eventferry),
        # A relay that hangs is sent SIGABRT, and says where each of its threads was.
        PYTHONFAULTHANDLER="1",
    )
    if db_port is not None:
        env.update(through_port(db_port))
    return env


def db_address() -> tuple[str, int]:
    """Where the test database listens (for a proxy in front of it)."""
    settings = connection.settings_dict
    return settings["HOST"] or "127.0.0.1", int(settings["PORT"])


def through_port(port: int) -> dict[str, str]:
    """The environment that points tests.settings at 127.0.0.1:``port``."""
    vendor = connection.vendor
    if vendor == "postgresql":
        return {"PGHOST": "127.0.0.1", "PGPORT": str(port)}
    if vendor == "mysql":
        return {"MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": str(port)}
    if vendor == "microsoft":
        url = urlsplit(os.environ["EVENTFERRY_MSSQL_URL"])
        netloc = url.netloc.rsplit("@", 1)
        credentials = netloc[0] + "@" if len(netloc) == 2 else ""
        return {"EVENTFERRY_MSSQL_URL": url._replace(
            netloc=f"{credentials}127.0.0.1:{port}").geturl()}
    raise AssertionError(f"no network between a relay and {vendor}")


def start_relay(eventferry: dict[str, Any], *args: str, log: Path | None = None,
                db_port: int | None = None, root: Path = ROOT) -> subprocess.Popen[bytes]:
    """A relay process of the tree at ``root`` (this one by default)."""
    out = log.open("ab") if log else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "-m", "django", "outbox_relay", *args],
        env=relay_env(eventferry, db_port, root=root), cwd=root, stdout=out,
        stderr=subprocess.STDOUT,
    )


def wait_until(condition: Callable[[], object], timeout: float = 30.0,
               what: str = "condition") -> None:
    """Poll ``condition`` until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def freeze_between_transactions(process: subprocess.Popen[bytes], *tables: str) -> None:
    """SIGSTOP ``process`` at a moment it holds no lock on any of ``tables`` (quoted).

    A process frozen inside a transaction keeps its locks until it runs again (SQLite's
    is the whole database), so no other relay could take over from it: that is not the
    pause a test of a stale relay means. Its transactions are short, so freezing it
    again a moment later finds it between two."""
    for _ in range(100):
        process.send_signal(signal.SIGSTOP)
        if not any(_locked(table) for table in tables):
            return
        process.send_signal(signal.SIGCONT)
        time.sleep(0.02)
    raise AssertionError(f"process {process.pid} held a lock on {', '.join(tables)} at "
                         "every try")


def _locked(table: str) -> bool:
    """Whether another session holds a lock on ``table`` that a writer would wait for."""
    if connection.vendor == "sqlite":
        # A second connection: Django's waits out its busy timeout on a locked database.
        probe = sqlite3.connect(connection.settings_dict["NAME"], timeout=0,
                                isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
        except sqlite3.OperationalError:
            return True
        finally:
            probe.close()
        return False
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_nowait_lock_sql(table))
            cursor.fetchall()
    except DatabaseError:
        return True
    return False


def _nowait_lock_sql(table: str) -> str:
    if connection.vendor == "microsoft":
        return f"SELECT 1 FROM {table} WITH (UPDLOCK, ROWLOCK, NOWAIT)"
    return f"SELECT 1 FROM {table} FOR UPDATE NOWAIT"
