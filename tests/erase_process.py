"""``manage.py outbox_erase`` as a real process killed (SIGKILL) halfway through: for a
Delta archive once the delete is committed and before the vacuum, for a Parquet archive
once the first rewritten file's original is deleted and before its replacement moves
into place. No cleanup of any kind runs.

    python tests/erase_process.py --from PATH --aggregate-id ID [options]

Run with the environment of :func:`tests.relay_process.relay_env`.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django

django.setup()

from django.core.management import call_command  # noqa: E402

from eventferry_django.history.delta import DeltaArchive  # noqa: E402
from eventferry_django.history.storage import ArchiveFiles  # noqa: E402


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


rename = ArchiveFiles.rename


def die_moving_a_replacement(self: ArchiveFiles, source: str, target: str) -> None:
    if "/_erasing/" in source:
        die()
    rename(self, source, target)


DeltaArchive.vacuum = lambda self: die()  # type: ignore[assignment,method-assign,misc,return-value]
ArchiveFiles.rename = die_moving_a_replacement  # type: ignore[method-assign]
call_command("outbox_erase", *sys.argv[1:])
