"""The soak (benchmarks/soak.py) at 50,000 events with a few faults: nothing lost, no
phantoms, no order violations, nothing dead, duplicates within their bound.

It starts its own PostgreSQL and RabbitMQ (benchmarks/servers.py), so it runs once, in
the PostgreSQL run of the suite; ``python benchmarks/soak.py`` is the full-size version.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .settings import VENDOR

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(VENDOR != "postgres", reason="runs once, in the PostgreSQL run"),
]


def test_soak_50000_events_through_kills_and_restarts() -> None:
    result = subprocess.run(
        [sys.executable, "benchmarks/soak.py", "--db", "postgres", "--events", "50000",
         "--faults", "0.1", "--max-per-transaction", "16"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "| lost " in result.stdout
