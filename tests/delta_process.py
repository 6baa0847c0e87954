"""``manage.py outbox_archive --format delta`` as a real process killed (SIGKILL) during
its Delta commit: ``before-commit`` dies once the run's files are in the table's
directories and before delta-rs commits them, ``after-commit`` right after the commit,
before the manifest. No cleanup of any kind runs.

    python tests/delta_process.py before-commit|after-commit --to PATH [options]

Run with the environment of :func:`tests.relay_process.relay_env`.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django

django.setup()

from django.core.management import call_command  # noqa: E402

from eventferry_django.history.delta import DeltaArchive  # noqa: E402

commit_run = DeltaArchive.commit_run
when = sys.argv[1]


def die_around_the_commit(self: DeltaArchive, run_id: str, files: Any) -> int:
    if when == "before-commit":
        os.kill(os.getpid(), signal.SIGKILL)
    version = commit_run(self, run_id, files)
    os.kill(os.getpid(), signal.SIGKILL)
    return version


DeltaArchive.commit_run = die_around_the_commit  # type: ignore[method-assign]
call_command("outbox_archive", *sys.argv[2:])
