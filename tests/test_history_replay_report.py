"""outbox_replay and outbox_report with real Spark on the real test database."""

from __future__ import annotations

import csv
import datetime as dt
import json
import shutil
from collections import defaultdict
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import F

from eventferry_django.history.archive import ArchiveRequest, archive
from eventferry_django.history.replay import (
    ORIGINAL_ID_HEADER,
    REPLAY_ID_HEADER,
    replayed_message_id,
)
from eventferry_django.models import OutboxEvent, Status

from .history_data import seed
from .history_sql import sql_figures

pytestmark = pytest.mark.django_db(transaction=True)


def command(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_replay_of_a_topic_slice_enqueues_it_in_order_once(spark: Any, tmp_path: Path) -> None:
    history = seed()
    # Every other original has a schema version, which the replay keeps.
    OutboxEvent.objects.alias(parity=F("id") % 2).filter(parity=0).update(schema_version="2")
    originals = [{**row, "payload": json.loads(row["payload"]),
                  "headers": json.loads(row["headers"])} for row in OutboxEvent.objects.values()]
    root = str(tmp_path / "archive")
    archived = archive(ArchiveRequest(path=root, older_than=dt.timedelta(days=1),
                                      status="both", purge=True))
    since = history.now - dt.timedelta(days=4)
    until = history.now - dt.timedelta(days=3)
    expected = sorted(
        (r for r in originals
         if r["topic"] == "order.paid" and r["status"] == Status.DONE
         and since <= r["processed_at"] < until),
        key=lambda r: r["id"],
    )
    assert 100 < len(expected) < 1000
    args = ["outbox_replay", "--from", root, "--topic", "order.paid",
            "--since", since.isoformat(), "--until", until.isoformat()]

    dry = command(*args, "--dry-run")
    assert f"order.paid  {len(expected):,}" in dry and "Would replay" in dry
    assert not OutboxEvent.objects.filter(headers__contains=REPLAY_ID_HEADER).exists()

    first = command(*args)
    replays = list(OutboxEvent.objects.filter(headers__contains=REPLAY_ID_HEADER).order_by("id"))
    assert len(replays) == len(expected), first
    replay_id = json.loads(replays[0].headers)[REPLAY_ID_HEADER]
    assert f"Replayed {len(expected):,} of {len(expected):,}" in first
    assert archived.run_id is not None
    for replayed, original in zip(replays, expected, strict=True):  # in original id order
        headers = json.loads(replayed.headers)
        assert headers[ORIGINAL_ID_HEADER] == original["message_id"]
        assert headers[REPLAY_ID_HEADER] == replay_id
        assert headers["x-tenant"] == original["headers"]["x-tenant"]
        assert replayed.message_id == replayed_message_id(replay_id, original["message_id"])
        assert json.loads(replayed.payload) == original["payload"]
        assert (replayed.topic, replayed.aggregate_id, replayed.partition_key) == (
            original["topic"], original["aggregate_id"], original["partition_key"])
        assert replayed.schema_version == original["schema_version"]
        assert replayed.status == Status.PENDING
    by_aggregate: dict[str, list[str]] = defaultdict(list)
    for replayed in replays:
        by_aggregate[replayed.aggregate_id].append(json.loads(replayed.headers)[ORIGINAL_ID_HEADER])
    for aggregate, originals in by_aggregate.items():
        assert originals == [r["message_id"] for r in expected if r["aggregate_id"] == aggregate]

    second = command(*args)
    assert "Replayed 0 of" in second and replay_id in second
    assert OutboxEvent.objects.filter(headers__contains=REPLAY_ID_HEADER).count() == len(expected)

    # Delivered, archived and purged since: the identical replay still adds nothing.
    OutboxEvent.objects.filter(headers__contains=REPLAY_ID_HEADER).update(
        status=Status.DONE, processed_at=history.now - dt.timedelta(days=1, hours=1))
    again = archive(ArchiveRequest(path=root, older_than=dt.timedelta(days=1), purge=True))
    assert again.archived == len(expected)
    assert not OutboxEvent.objects.filter(headers__contains=REPLAY_ID_HEADER).exists()
    third = command(*args)
    assert "Replayed 0 of" in third and replay_id in third
    assert not OutboxEvent.objects.filter(headers__contains=REPLAY_ID_HEADER).exists()


def read_csv(path: Path) -> dict[tuple[str, str, str, str], float]:
    with open(path, encoding="utf-8") as handle:
        return {(r["topic"], r["hour"], r["figure"], r["key"]): float(r["value"])
                for r in csv.DictReader(handle)}


def assert_same_figures(reported: dict[Any, float], expected: dict[Any, float]) -> None:
    assert set(reported) == set(expected)
    different = {k: (reported[k], expected[k]) for k in expected
                 if abs(reported[k] - expected[k]) > 0.002}
    assert not different


#: The documentation's history page shows the report's plots from here (docs/history.md),
#: so each run keeps them current.
DOCS_IMAGES = Path(__file__).resolve().parent.parent / "docs" / "img"


def keep_documentation_plots(report: Path) -> None:
    for name in ("events", "latency", "attempts", "dead"):
        shutil.copyfile(report / f"{name}.png", DOCS_IMAGES / f"report-{name}.png")


def test_report_figures_equal_the_same_figures_computed_in_sql(spark: Any, tmp_path: Path) -> None:
    seed()
    root = str(tmp_path / "archive")
    result = archive(ArchiveRequest(path=root, older_than=dt.timedelta(days=1), status="both"))
    out = tmp_path / "report"
    printed = command("outbox_report", "--from", root, "--out", str(out))
    assert f"Reported {result.archived:,} event(s)" in printed
    reported = read_csv(out / "figures.csv")
    assert reported.pop(("", "", "erasures", "")) == 0  # the archive's erasure log is empty
    assert_same_figures(reported, sql_figures(before=result.cutoff))
    assert sum(v for (t, h, f, _), v in reported.items() if f == "events" and h == "") == result.archived
    assert {p.name for p in out.iterdir()} == {"index.html", "figures.csv", "events.png",
                                                "latency.png", "attempts.png", "dead.png"}
    page = (out / "index.html").read_text()
    assert "odd/topic: ü=1" in page and "406 PRECONDITION_FAILED" in page
    assert all((out / name).read_bytes().startswith(b"\x89PNG") for name in
               ("events.png", "latency.png", "attempts.png", "dead.png"))
    keep_documentation_plots(out)

    live = tmp_path / "live"
    command("outbox_report", "--live", "--out", str(live))
    assert_same_figures(read_csv(live / "figures.csv"), sql_figures())

    with pytest.raises(CommandError, match="holds no committed archive run") as wrong:
        command("outbox_report", "--from", str(tmp_path / "nowhere"), "--out", str(out))
    assert wrong.value.returncode == 1
