"""Golden-file comparison: ``EVENTFERRY_UPDATE_GOLDEN=1 pytest`` rewrites the files."""

from __future__ import annotations

import os
from pathlib import Path

GOLDEN_DIR = Path(__file__).parent / "golden"


def assert_golden(name: str, actual: str) -> None:
    path = GOLDEN_DIR / name
    if os.environ.get("EVENTFERRY_UPDATE_GOLDEN") == "1":
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"{path} is missing; run with EVENTFERRY_UPDATE_GOLDEN=1 to create it"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{name} differs from its golden file; review, then update it"
