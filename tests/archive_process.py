"""``manage.py outbox_archive`` as a real process that is killed (SIGKILL) the moment it
would write its manifest: the run's Parquet is in place, the manifest is not, the lock
is still held, and no cleanup of any kind runs.

    python tests/archive_process.py --to PATH [outbox_archive options]

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

from eventferry_django.history.storage import ArchiveFiles  # noqa: E402

write_text = ArchiveFiles.write_text


def die_before_the_manifest(self: ArchiveFiles, path: str, text: str) -> None:
    if "/_manifests/" in path:
        os.kill(os.getpid(), signal.SIGKILL)
    write_text(self, path, text)


ArchiveFiles.write_text = die_before_the_manifest  # type: ignore[method-assign]
call_command("outbox_archive", *sys.argv[1:])
