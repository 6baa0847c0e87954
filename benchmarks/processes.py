"""Stopping the processes a benchmark (or a test) started."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterable


def terminate(processes: Iterable[subprocess.Popen[bytes]], timeout: float
              ) -> list[subprocess.Popen[bytes]]:
    """SIGTERM every process still running, then wait up to ``timeout`` seconds for each;
    those that do not stop in time are SIGKILLed and returned."""
    processes = list(processes)
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    killed = []
    for process in processes:
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            killed.append(process)
    return killed
