"""outbox_archive with real Spark (local mode) on the real test database: counts and
checksums reconcile, the purge is exact, crashes lose and duplicate nothing."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections import Counter
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from eventferry_django.history.archive import Archiver, ArchiveRequest, archive
from eventferry_django.history.errors import EXIT_BUSY
from eventferry_django.history.reader import read_committed
from eventferry_django.history.storage import ArchiveFiles
from eventferry_django.maintenance import RedriveSelection, redrive
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.store.outbox import OutboxStore

from .history_data import archived_candidates, seed
from .relay_process import ROOT, relay_env

pytestmark = pytest.mark.django_db(transaction=True)


class SimulatedCrash(BaseException):
    """Stands for the process dying at this point: nothing after it runs."""


def archived_rows(spark: Any, root: Path) -> list[Any]:
    files = ArchiveFiles(spark, str(root))
    return read_committed(spark, files).select("id", "message_id", "status").collect()


def visible(directory: Path) -> list[str]:
    """File names a reader would see (Hadoop's local file system adds hidden .crc files)."""
    if not directory.exists():
        return []
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith((".", "_")))


def first_run(spark: Any, root: Path) -> str:
    return ArchiveFiles(spark, str(root)).manifests()[0].run_id


def test_archive_reconciles_and_purges_exactly_the_archived_rows(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    history = seed()
    root = tmp_path / "archive"
    redriven: list[int] = []
    real_purge = Archiver._purge

    def purge_after_a_redrive(self: Archiver, manifest: Any, *args: Any) -> Any:
        # A dead row archived, then redriven before the purge reaches it.
        dead = OutboxEvent.objects.filter(status=Status.DEAD).order_by("id").first()
        assert dead is not None
        redriven.append(dead.id)
        redrive(RedriveSelection(ids=[dead.id]))
        return real_purge(self, manifest, *args)

    monkeypatch.setattr(Archiver, "_purge", purge_after_a_redrive)
    before = {row.id: row for row in OutboxEvent.objects.all()}
    result = archive(ArchiveRequest(path=str(root), older_than=dt.timedelta(days=1),
                                    status="both", purge=True, purge_range_size=700,
                                    purge_batch_size=700))
    expected = {i: (r.message_id, r.status) for i, r in before.items()
                if r.status in (Status.DONE, Status.DEAD) and r.processed_at < result.cutoff}
    assert len(expected) == history.old_done + history.old_dead

    rows = archived_rows(spark, root)
    assert {r.id: (r.message_id, r.status) for r in rows} == expected
    assert len(rows) == len(expected)  # no duplicates
    manifest = ArchiveFiles(spark, str(root)).manifests()[0]
    assert manifest.checksum.rows == result.archived == len(expected)
    assert manifest.checksum.id_sum == sum(expected)
    assert manifest.checksum.id_mix == sum((i % 65521) * (i % 65519) for i in expected)
    assert (manifest.min_id, manifest.max_id) == (min(expected), max(expected))

    remaining = set(OutboxEvent.objects.values_list("id", flat=True))
    assert remaining == (set(before) - set(expected)) | set(redriven)
    assert result.purged == len(expected) - 1 and result.purge_kept == 1
    untouched = OutboxEvent.objects.exclude(id__in=redriven)
    assert sorted(untouched.values_list("status", flat=True).distinct()) == [0, 2, 3]
    assert OutboxEvent.objects.get(id=redriven[0]).status == Status.PENDING

    # A second run finds nothing new: the committed run's span holds those rows.
    again = archive(ArchiveRequest(path=str(root), older_than=dt.timedelta(days=1),
                                   status="both", purge=True))
    assert again.archived == 0 and again.run_id is None
    assert len(archived_rows(spark, root)) == len(expected)


def run_archive(root: Path, **options: Any) -> Any:
    return archive(ArchiveRequest(path=str(root), older_than=dt.timedelta(days=1),
                                  status="both", **options))


def test_crash_after_the_write_before_the_manifest_leaves_nothing_visible(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed()
    root = tmp_path / "archive"
    real_write = ArchiveFiles.write_text

    def crash_on_manifest(self: ArchiveFiles, path: str, text: str) -> None:
        if "/_manifests/" in path:
            raise SimulatedCrash
        real_write(self, path, text)

    with monkeypatch.context() as patched:
        patched.setattr(ArchiveFiles, "write_text", crash_on_manifest)
        with pytest.raises(SimulatedCrash):
            run_archive(root, purge=True)
    # The run's Parquet is in place, but without its manifest no reader sees it, and
    # nothing was purged.
    assert [p.name for p in root.iterdir() if p.name.startswith("archive_run_id=")]
    assert archived_rows(spark, root) == []
    assert visible(root / "_manifests") == []
    assert OutboxEvent.objects.count() == 10_000

    result = run_archive(root, purge=True)
    expected_count = result.archived
    rows = archived_rows(spark, root)
    assert len(rows) == len({r.id for r in rows}) == expected_count == 9_400
    assert [p.name for p in root.iterdir() if p.name.startswith("archive_run_id=")] == [
        f"archive_run_id={result.run_id}"]
    assert visible(root / "_staging") == []
    assert OutboxEvent.objects.count() == 600


@pytest.mark.slow  # SIGKILLs a JVM of its own mid-run
def test_a_run_killed_before_its_manifest_is_invisible_and_the_next_run_takes_over(
        spark: Any, tmp_path: Path) -> None:
    """The same crash as above, for real: a process killed with SIGKILL, its lock left."""
    seed()
    root = tmp_path / "archive"
    killed = subprocess.run(
        [sys.executable, "tests/archive_process.py", "--to", str(root), "--older-than", "1d",
         "--status", "both", "--purge"],
        env=relay_env(settings.EVENTFERRY), cwd=ROOT, capture_output=True, timeout=600,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    owner = json.loads((root / "_lock").read_text())
    assert owner["host"] == socket.gethostname()
    assert [p.name for p in root.iterdir() if p.name.startswith("archive_run_id=")]
    assert visible(root / "_manifests") == [] and archived_rows(spark, root) == []
    assert OutboxEvent.objects.count() == 10_000

    result = run_archive(root, purge=True)
    rows = archived_rows(spark, root)
    assert len(rows) == len({r.id for r in rows}) == result.archived == 9_400
    assert not (root / "_lock").exists()
    assert visible(root) == [f"archive_run_id={result.run_id}"]
    assert OutboxEvent.objects.count() == 600


def test_crash_after_the_manifest_before_the_purge_is_resumed_once(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed()
    root = tmp_path / "archive"
    with monkeypatch.context() as patched:
        patched.setattr(Archiver, "_purge", lambda self, *args: (_ for _ in ()).throw(
            SimulatedCrash()))
        with pytest.raises(SimulatedCrash):
            run_archive(root, purge=True)
    first = archived_rows(spark, root)
    assert len(first) == 9_400 and OutboxEvent.objects.count() == 10_000

    expected = archived_candidates(dt.datetime.now(dt.UTC) - dt.timedelta(days=1))
    out = StringIO()
    call_command("outbox_archive", "--to", str(root), "--older-than", "1d", "--status", "both",
                 "--purge", stdout=out)
    printed = out.getvalue()
    assert "was not purged yet" in printed and "Nothing to archive." in printed
    assert "Archived 0 row(s)" in printed and "purged 9,400, finishing 1 earlier run(s)" in printed
    rows = archived_rows(spark, root)
    assert sorted(r.id for r in rows) == sorted(expected) == sorted(r.id for r in first)
    assert OutboxEvent.objects.count() == 600
    assert visible(root / "_purges") == [f"{first_run(spark, root)}.json"]


def test_dry_run_counts_per_topic_and_status_and_touches_nothing(
        spark: Any, tmp_path: Path) -> None:
    seed()
    root = tmp_path / "archive"
    out = StringIO()
    call_command("outbox_archive", "--to", str(root), "--older-than", "1d", "--status", "both",
                 "--purge", "--dry-run", stdout=out)
    printed = out.getvalue()
    expected = OutboxEvent.objects.filter(status__in=(Status.DONE, Status.DEAD),
                                          processed_at__lt=dt.datetime.now(dt.UTC)
                                          - dt.timedelta(days=1))
    for topic in ("order.created", "order.paid", "invoice.sent", "odd/topic: ü=1"):
        for status, name in ((Status.DONE, "done"), (Status.DEAD, "dead")):
            rows = expected.filter(topic=topic, status=status).count()
            assert f"  {topic}  {name}  {rows:,}\n" in printed
    assert "Would archive 9,400 row(s)" in printed
    assert not root.exists() or not any(root.iterdir())
    assert OutboxEvent.objects.count() == 10_000


def test_a_live_lock_makes_the_run_busy_and_a_dead_one_is_taken_over(
        spark: Any, tmp_path: Path) -> None:
    seed(old_done=50, old_dead=0, recent=0, open_each=0)
    root = tmp_path / "archive"
    root.mkdir()
    lock = root / "_lock"
    lock.write_text(json.dumps({"run_id": "x", "host": socket.gethostname(),
                                "pid": os.getppid()}))
    with pytest.raises(CommandError, match="another outbox_archive is writing") as busy:
        call_command("outbox_archive", "--to", str(root), "--older-than", "1d",
                     stdout=StringIO())
    assert busy.value.returncode == EXIT_BUSY
    assert OutboxEvent.objects.count() == 50

    # A lock whose process is gone (killed mid-run) is taken over.
    lock.write_text(json.dumps({"run_id": "x", "host": socket.gethostname(), "pid": 2**22 + 7}))
    assert run_archive(root, purge=True).archived == 50
    assert not lock.exists() and not OutboxEvent.objects.exists()


def test_ranges_that_check_out_go_in_one_delete_and_a_changed_one_key_by_key(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges of 20 ids: each is one DELETE of the run's selection when the outbox's rows
    there have the archive's count and checksum; the range where an archived row was
    deleted meanwhile (by outbox_purge, say) is purged from its archived keys, 7 rows a
    statement."""
    seed(old_done=50, old_dead=0, recent=0, open_each=0)
    ids = sorted(OutboxEvent.objects.values_list("id", flat=True))
    gone = ids[25]
    keyed: list[int] = []
    by_range: list[tuple[int, int] | None] = []
    real_keyed, real_range = OutboxStore.purge_archived, OutboxStore.purge_selection
    real_purge = Archiver._purge

    def counted(self: OutboxStore, rows: Any, *, statuses: Any) -> int:
        keyed.append(len(rows))
        return real_keyed(self, rows, statuses=statuses)

    def ranged(self: OutboxStore, selection: Any, archived: Any) -> int | None:
        taken = real_range(self, selection, archived)
        by_range.append(None if taken is None else selection.id_range)
        return taken

    def purge_after_a_delete(self: Archiver, manifest: Any, *args: Any) -> Any:
        OutboxEvent.objects.filter(id=gone).delete()
        return real_purge(self, manifest, *args)

    monkeypatch.setattr(OutboxStore, "purge_archived", counted)
    monkeypatch.setattr(OutboxStore, "purge_selection", ranged)
    monkeypatch.setattr(Archiver, "_purge", purge_after_a_delete)
    result = run_archive(tmp_path / "archive", purge=True, purge_range_size=20,
                         purge_batch_size=7)
    assert result.archived == 50 and result.purged == 49 and result.purge_kept == 1
    assert not OutboxEvent.objects.exists()

    ranges = Counter(i // 20 for i in ids)
    assert len(by_range) == len(ranges) and by_range.count(None) == 1
    deleted_by_range = [(low, high) for low, high in filter(None, by_range)]
    assert all(high - low < 20 and low // 20 == high // 20 for low, high in deleted_by_range)
    changed = ranges[gone // 20]  # the archived keys of the changed range, the gone one too
    assert keyed == [7] * (changed // 7) + ([changed % 7] if changed % 7 else [])

def test_schema_versions_are_archived_and_older_archives_read_without_them(
        spark: Any, tmp_path: Path) -> None:
    seed(old_done=40, old_dead=4, recent=4, open_each=1)
    OutboxEvent.objects.filter(status=Status.DONE).update(schema_version="2")
    root = tmp_path / "archive"
    result = run_archive(root)
    files = ArchiveFiles(spark, str(root))
    rows = read_committed(spark, files).select("id", "status", "schema_version").collect()
    assert len(rows) == result.archived
    assert {(r.status, r.schema_version) for r in rows} == {(2, "2"), (4, None)}

    # An archive a development build wrote before schema_version existed: the same run's files without the column.
    [run_dir] = root.glob("archive_run_id=*")
    legacy = tmp_path / "legacy"
    (spark.read.parquet(str(run_dir)).drop("schema_version")
     .write.partitionBy("topic", "day").parquet(str(legacy)))
    shutil.rmtree(run_dir)
    shutil.move(str(legacy), str(run_dir))
    assert "schema_version" not in spark.read.parquet(str(run_dir)).columns

    old = read_committed(spark, files).select("id", "schema_version").collect()
    assert sorted(r.id for r in old) == sorted(r.id for r in rows)
    assert {r.schema_version for r in old} == {None}
