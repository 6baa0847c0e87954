"""outbox_archive --format delta with real Spark (local mode) on the real test database:
one Delta commit per run that delta-rs and Polars read, idempotent, crash-safe."""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from eventferry_django.history.archive import ArchiveRequest, archive
from eventferry_django.history.delta import DeltaArchive, archive_app_id
from eventferry_django.history.reader import read_committed
from eventferry_django.history.storage import ArchiveFiles
from eventferry_django.models import OutboxEvent, Status

from .history_data import seed
from .relay_process import ROOT, relay_env

pytestmark = pytest.mark.django_db(transaction=True)


def run_delta(root: Path, older_than_days: int = 1, **options: Any) -> Any:
    return archive(ArchiveRequest(path=str(root), older_than=dt.timedelta(days=older_than_days),
                                  status="both", format="delta", **options))


def log_versions(root: Path) -> list[int]:
    return sorted(int(p.stem) for p in (root / "_delta_log").glob("*.json"))


def expected_rows(cutoff: dt.datetime) -> dict[int, str]:
    return dict(OutboxEvent.objects.filter(
        status__in=(Status.DONE, Status.DEAD), processed_at__lt=cutoff,
    ).values_list("id", "message_id"))


def test_a_delta_archive_is_one_commit_per_run_that_deltalake_and_polars_read(
        spark: Any, tmp_path: Path) -> None:
    import polars as pl
    from deltalake import DeltaTable

    seed()
    root = tmp_path / "table"
    expected = expected_rows(dt.datetime.now(dt.UTC) - dt.timedelta(days=1))
    result = run_delta(root, purge=True)
    assert result.archived == len(expected) == 9_400 and result.purged == 9_400

    table = DeltaTable(str(root))
    assert log_versions(root) == [0, 1] and table.version() == 1  # created, then the run
    assert table.transaction_version(archive_app_id(str(result.run_id))) == 1
    assert table.metadata().partition_columns == ["topic", "day"]
    frame = pl.read_delta(str(root))
    assert frame.height == 9_400 and frame["id"].n_unique() == 9_400
    assert dict(zip(frame["id"].to_list(), frame["message_id"].to_list(), strict=True)) == expected
    assert set(frame["archive_run_id"].to_list()) == {result.run_id}
    assert "odd/topic: ü=1" in set(frame["topic"].to_list())
    by_day = frame.select((pl.col("day") == pl.col("processed_at").dt.date()).all()).item()
    assert by_day
    # The log holds no payload and no aggregate id: statistics cover id and time only.
    log = "".join(p.read_text() for p in (root / "_delta_log").glob("*.json"))
    assert "agg-" not in log and '"total"' not in log
    # Spark reads it through the same reader as a Parquet archive.
    assert read_committed(spark, ArchiveFiles(spark, str(root))).count() == 9_400

    # A second run finds nothing new and makes no commit.
    again = run_delta(root, purge=True)
    assert again.archived == 0 and log_versions(root) == [0, 1]
    assert OutboxEvent.objects.count() == 600


def test_a_parquet_archive_is_not_turned_into_a_delta_table(spark: Any, tmp_path: Path) -> None:
    seed(old_done=20, old_dead=0, recent=0, open_each=0)
    root = tmp_path / "archive"
    archive(ArchiveRequest(path=str(root), older_than=dt.timedelta(days=1), format="parquet"))
    with pytest.raises(Exception, match="holds a parquet archive"):
        run_delta(root)
    assert not (root / "_delta_log").exists()


def kill_during_commit(root: Path, when: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "tests/delta_process.py", when, "--to", str(root), "--older-than",
         "1d", "--status", "both", "--purge", "--format", "delta"],
        env=relay_env(settings.EVENTFERRY), cwd=ROOT, capture_output=True, timeout=600,
        check=False,
    )


def pending_run(root: Path) -> tuple[str, list[str]]:
    """The run id and the moved files of the one run caught between its files and its
    manifest."""
    (pending,) = (root / "_commits").glob("*.json")
    return pending.stem, json.loads(pending.read_text())["files"]


@pytest.mark.slow  # SIGKILLs a JVM of its own mid-run
def test_runs_killed_just_before_and_just_after_their_delta_commit_append_exactly_once(
        spark: Any, tmp_path: Path) -> None:
    """SIGKILL of a real archive process just before delta-rs commits its files, then of
    another just after: each next run removes the uncommitted files, or finishes the
    committed run; every row ends in the table once and is purged once."""
    from deltalake import DeltaTable

    seed()
    root = tmp_path / "table"
    killed = kill_during_commit(root, "before-commit")
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    first, first_files = pending_run(root)
    assert first_files and all((root / f).exists() for f in first_files)
    assert (root / "_lock").exists() and OutboxEvent.objects.count() == 10_000
    assert DeltaTable(str(root)).transaction_version(archive_app_id(first)) is None

    killed = kill_during_commit(root, "after-commit")
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    second, second_files = pending_run(root)
    assert second != first and not any((root / f).exists() for f in first_files)
    table = DeltaTable(str(root))
    assert table.transaction_version(archive_app_id(second)) == 1 and table.version() == 1
    assert table.transaction_version(archive_app_id(first)) is None
    assert OutboxEvent.objects.count() == 10_000  # killed before its purge

    result = run_delta(root, purge=True)
    assert result.archived == 0 and result.resumed == [second]
    ids = [row["id"] for row in read_committed(
        spark, ArchiveFiles(spark, str(root))).select("id").collect()]
    assert len(ids) == len(set(ids)) == 9_400
    assert OutboxEvent.objects.count() == 600
    assert not (root / "_lock").exists() and not list((root / "_commits").glob("*.json"))
    assert DeltaTable(str(root)).version() == 1
    on_disk = {p.relative_to(root).as_posix() for p in root.glob("topic=*/day=*/*.parquet")}
    assert on_disk == set(second_files) == {f.path for f in DeltaArchive(str(root)).data_files()}


def test_format_is_checked(spark: Any, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="invalid choice: 'iceberg'"):
        call_command("outbox_archive", "--to", str(tmp_path), "--format", "iceberg")


def test_compaction_merges_the_small_files_of_many_runs_in_one_commit(
        spark: Any, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    seed(old_done=3_000, old_dead=0, recent=0, open_each=0)
    root = tmp_path / "table"
    for days in (4, 3, 2):  # three runs (the last takes the rest), each three Spark tasks
        assert run_delta(root, partitions=3, older_than_days=days).archived > 0
    before = DeltaTable(str(root))
    rows_before = sorted((r["id"], r["message_id"], r["archive_run_id"]) for r in read_committed(
        spark, ArchiveFiles(spark, str(root))).select("id", "message_id", "archive_run_id").collect())
    files_before = len(before.file_uris())
    partitions = {(f.topic, f.day) for f in DeltaArchive(str(root)).data_files()}
    assert files_before > 2 * len(partitions)

    out = StringIO()
    call_command("outbox_archive", "--to", str(root), "--older-than", "1d", "--format",
                 "delta", "--compact", stdout=out)
    assert "Archived 0 row(s)" in out.getvalue() and "Compacted" in out.getvalue()
    after = DeltaTable(str(root))
    assert after.version() == before.version() + 1  # one commit
    assert after.history(1)[0]["operation"] == "OPTIMIZE"
    assert len(after.file_uris()) < files_before
    compacted = DeltaArchive(str(root)).data_files()
    assert sorted((f.topic, f.day) for f in compacted) == sorted(partitions)  # one file each
    rows_after = sorted((r["id"], r["message_id"], r["archive_run_id"]) for r in read_committed(
        spark, ArchiveFiles(spark, str(root))).select("id", "message_id", "archive_run_id").collect())
    assert rows_after == rows_before and len({r[0] for r in rows_after}) == 3_000


def test_compaction_of_a_parquet_archive_is_refused_before_anything_runs(
        spark: Any, tmp_path: Path) -> None:
    seed(old_done=10, old_dead=0, recent=0, open_each=0)
    with pytest.raises(CommandError, match="--compact needs a Delta archive"):
        call_command("outbox_archive", "--to", str(tmp_path / "p"), "--older-than", "1d",
                     "--compact", stdout=StringIO())
    assert OutboxEvent.objects.count() == 10 and not (tmp_path / "p" / "_manifests").exists()
