"""outbox_erase with real Spark (local mode) on the real test database, on a Delta and
on a Parquet archive: no byte of the erased aggregate stays in any Parquet file under the
archive, the outbox and the inbox forget it, and a kill halfway is finished by a rerun."""

from __future__ import annotations

import csv
import datetime as dt
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command

from eventferry_django.history.archive import ArchiveRequest, archive
from eventferry_django.history.reader import read_committed
from eventferry_django.history.storage import ArchiveFiles
from eventferry_django.models import InboxMessage, OutboxEvent, Status

from .history_data import insert, seed
from .relay_process import ROOT, relay_env

pytestmark = pytest.mark.django_db(transaction=True)

CUSTOMER = "customer-42"
MARKER = b"erase-me-42@example.com"


def add_customer(now: dt.datetime) -> list[str]:
    """Closed events of CUSTOMER, old enough to archive, and one still pending."""
    rows = []
    for n in range(30):
        processed = now - dt.timedelta(days=2 + n % 3, minutes=n)
        rows.append(OutboxEvent(
            message_id=f"c42-{n:02d}", topic=("order.paid", "odd/topic: ü=1")[n % 2],
            aggregate_type="customer", aggregate_id=CUSTOMER, partition_key=None,
            payload=json.dumps({"email": MARKER.decode(), "n": n}), headers="{}",
            trace_id=None, status=Status.DEAD if n % 10 == 0 else Status.DONE,
            attempts=0, created_at=processed - dt.timedelta(seconds=1), processed_at=processed,
        ))
    rows.append(OutboxEvent(
        message_id="c42-open", topic="order.paid", aggregate_type="customer",
        aggregate_id=CUSTOMER, partition_key=None, payload=json.dumps({"email": MARKER.decode()}),
        headers="{}", trace_id=None, status=Status.PENDING, attempts=0, created_at=now,
        processed_at=None,
    ))
    insert(rows)
    return [r.message_id for r in rows[:30]]


def parquet_files_holding(root: Path, needle: bytes) -> list[Path]:
    """Every Parquet file under the archive (data, staging, Delta checkpoints, files no
    version refers to) whose bytes contain ``needle``."""
    return [p for p in root.rglob("*.parquet") if needle in p.read_bytes()]


@pytest.fixture
def uncompressed(spark: Any) -> Iterator[None]:
    """Spark writes Parquet uncompressed, so a value is in a file's bytes as it is."""
    spark.conf.set("spark.sql.parquet.compression.codec", "uncompressed")
    yield
    spark.conf.unset("spark.sql.parquet.compression.codec")


def archived_ids(spark: Any, root: Path, aggregate: str) -> list[int]:
    frame = read_committed(spark, ArchiveFiles(spark, str(root)))
    return [r["id"] for r in frame.where(frame["aggregate_id"] == aggregate).select("id").collect()]


def archived_and_indexed(spark: Any, root: Path, fmt: str) -> tuple[list[str], int]:
    history = seed(old_done=1_500, old_dead=100, recent=50, open_each=10)
    erased = add_customer(history.now)
    result = archive(ArchiveRequest(path=str(root), older_than=dt.timedelta(days=1),
                                    status="both", format=fmt))
    InboxMessage.objects.bulk_create([InboxMessage(consumer="billing", message_id=m)
                                      for m in [*erased[:5], "m-00001", "m-00002"]])
    assert len(archived_ids(spark, root, CUSTOMER)) == 30
    assert parquet_files_holding(root, MARKER) and parquet_files_holding(root, CUSTOMER.encode())
    return erased, result.archived


@pytest.mark.parametrize("fmt", ["delta", "parquet"])
def test_erasure_leaves_no_byte_of_the_aggregate_in_the_archive(
        spark: Any, uncompressed: None, tmp_path: Path, fmt: str) -> None:
    root = tmp_path / "archive"
    _, archived = archived_and_indexed(spark, root, fmt)
    other = archived_ids(spark, root, "agg-7")

    dry = StringIO()
    call_command("outbox_erase", "--from", str(root), "--aggregate-id", CUSTOMER, "--inbox",
                 "--dry-run", stdout=dry)
    assert "Would erase aggregate customer-42: 30 archived row(s)" in dry.getvalue()
    assert "30 closed outbox row(s), 5 inbox record(s)" in dry.getvalue()
    assert parquet_files_holding(root, MARKER)

    out = StringIO()
    call_command("outbox_erase", "--from", str(root), "--aggregate-id", CUSTOMER,
                 "--aggregate-type", "customer", "--inbox", stdout=out)
    printed = out.getvalue()
    assert "Erased aggregate customer/customer-42: 30 archived row(s)" in printed, printed
    assert "30 closed outbox row(s), 5 inbox record(s)" in printed
    assert "1 open outbox row(s) of it are not delivered yet" in printed

    assert parquet_files_holding(root, MARKER) == []
    assert parquet_files_holding(root, CUSTOMER.encode()) == []
    assert archived_ids(spark, root, CUSTOMER) == []
    assert sorted(archived_ids(spark, root, "agg-7")) == sorted(other)
    assert read_committed(spark, ArchiveFiles(spark, str(root))).count() == archived - 30
    assert list(OutboxEvent.objects.filter(aggregate_id=CUSTOMER).values_list(
        "message_id", flat=True)) == ["c42-open"]
    assert sorted(InboxMessage.objects.values_list("message_id", flat=True)) == [
        "m-00001", "m-00002"]
    log = [json.loads(p.read_text()) for p in (root / "_erasures").glob("*.json")]
    assert len(log) == 1 and log[0]["state"] == "done"
    assert (log[0]["aggregate_id"], log[0]["archived_rows"], log[0]["outbox_rows"],
            log[0]["inbox_records"]) == (CUSTOMER, 30, 30, 5)
    assert not any(MARKER in p.read_bytes() for p in (root / "_erasures").iterdir())

    # Replay finds nothing of it; the report counts the erasure.
    replay = StringIO()
    call_command("outbox_replay", "--from", str(root), "--aggregate-id", CUSTOMER,
                 "--status", "both", "--dry-run", stdout=replay)
    assert "Would replay 0 event(s)" in replay.getvalue()
    report = tmp_path / "report"
    call_command("outbox_report", "--from", str(root), "--out", str(report), stdout=StringIO())
    figures = list(csv.DictReader((report / "figures.csv").open(encoding="utf-8")))
    assert [r["value"] for r in figures if r["figure"] == "erasures"] == ["1"]
    assert sum(int(r["value"]) for r in figures
               if r["figure"] == "events" and r["hour"] == "") == archived - 30
    assert "1 erasure" in (report / "index.html").read_text()


@pytest.mark.slow  # SIGKILLs a JVM of its own mid-run
@pytest.mark.parametrize("fmt", ["delta", "parquet"])
def test_an_erasure_killed_halfway_is_finished_by_the_next(
        spark: Any, uncompressed: None, tmp_path: Path, fmt: str) -> None:
    root = tmp_path / "archive"
    erased, archived = archived_and_indexed(spark, root, fmt)
    killed = subprocess.run(
        [sys.executable, "tests/erase_process.py", "--from", str(root), "--aggregate-id",
         CUSTOMER, "--inbox"],
        env=relay_env(settings.EVENTFERRY), cwd=ROOT, capture_output=True, timeout=600,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    log = [json.loads(p.read_text()) for p in (root / "_erasures").glob("*.json")]
    assert [entry["state"] for entry in log] == ["started"]
    # Killed after the database was cleaned and before the archive's old files went.
    assert not OutboxEvent.objects.filter(aggregate_id=CUSTOMER, status=Status.DONE).exists()
    assert not InboxMessage.objects.filter(message_id__in=erased).exists()
    assert parquet_files_holding(root, MARKER)

    out = StringIO()
    call_command("outbox_erase", "--from", str(root), "--aggregate-id", CUSTOMER, "--inbox",
                 stdout=out)
    assert "Finishing erasure" in out.getvalue()
    assert "30 archived row(s)" in out.getvalue() and "5 inbox record(s)" in out.getvalue()
    assert parquet_files_holding(root, MARKER) == []
    assert archived_ids(spark, root, CUSTOMER) == []
    ids = [r["id"] for r in read_committed(spark, ArchiveFiles(spark, str(root)))
           .select("id").collect()]
    assert len(ids) == len(set(ids)) == archived - 30
    log = [json.loads(p.read_text()) for p in (root / "_erasures").glob("*.json")]
    assert [entry["state"] for entry in log] == ["done"] and log[0]["archived_rows"] == 30
    assert not (root / "_lock").exists() and not list((root / "_erasing").glob("*"))
