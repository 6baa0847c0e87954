"""Start ``manage.py outbox_relay`` as a real process against the test database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def relay_env(eventferry: dict[str, Any]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT),
        DJANGO_SETTINGS_MODULE="tests.settings",
        EVENTFERRY_TEST_DB_NAME=str(connection.settings_dict["NAME"]),
        EVENTFERRY_TEST_SETTINGS=json.dumps(eventferry),
    )
    return env


def start_relay(eventferry: dict[str, Any], *args: str, log: Path | None = None
                ) -> subprocess.Popen[bytes]:
    out = log.open("ab") if log else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "-m", "django", "outbox_relay", *args],
        env=relay_env(eventferry), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
    )


def wait_until(condition: Callable[[], object], timeout: float = 30.0,
               what: str = "condition") -> None:
    """Poll ``condition`` until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
