"""The history pipeline's SQL: T-SQL pinned by a golden file and parsed by sqlglot, and
the freeze and the exact purge run against the real test database (no Spark)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

import pytest
from django.utils import timezone
from sqlglot import exp

from eventferry_django.history.errors import HistoryError
from eventferry_django.history.manifest import Checksum, Manifest, archived_spans
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.naming import TableName
from eventferry_django.store import dialect_for
from eventferry_django.store.closed_rows import ArchivedSpan, ClosedRowSelection
from eventferry_django.store.microsoft import MicrosoftDialect
from eventferry_django.store.outbox import OutboxStore

from .golden import assert_golden
from .history_data import insert
from .test_ddl_golden import RecordingCursor
from .tsql import as_tsql_parameters, parse_tsql

UTC = dt.UTC
CUTOFF = dt.datetime(2026, 11, 20, 8, 30, 15, 123000, tzinfo=UTC)
SELECTION = ClosedRowSelection(
    statuses=(2, 4), before=CUTOFF,
    archived=(ArchivedSpan(1000, CUTOFF - dt.timedelta(days=1), (2,)),),
    id_range=(1001, 250_000),
)


def tsql_history(dialect: MicrosoftDialect) -> dict[str, tuple[str, list[object]]]:
    cursor = RecordingCursor()
    dialect.closed_rows.purge_archived(cursor, [(7, CUTOFF), (9, CUTOFF - dt.timedelta(seconds=1))], [2, 4])
    [purge] = cursor.statements
    return {
        "freeze": (dialect.closed_rows.selection_stats_sql(SELECTION), []),
        "source": (dialect.closed_rows.source_sql(SELECTION), []),
        "purge_archived": purge,
    }


def test_tsql_history_statements_match_golden() -> None:
    dialect = MicrosoftDialect(TableName("outbox", "messaging"))
    text = "".join(f"-- {name} {params!r}\n{sql};\n\n"
                   for name, (sql, params) in tsql_history(dialect).items())
    assert_golden("microsoft_history.sql", text)


def test_tsql_history_statements_parse_and_keep_their_promises() -> None:
    dialect = MicrosoftDialect(TableName("outbox", "messaging"))
    statements = tsql_history(dialect)
    freeze = parse_tsql(statements["freeze"][0])
    assert isinstance(freeze, exp.Select)
    assert "DECIMAL(38, 0)" in statements["freeze"][0]  # no BIGINT overflow in SUM
    source = parse_tsql(f"SELECT * FROM {statements['source'][0]}")
    assert {(t.db, t.name) for t in source.find_all(exp.Table)} == {("messaging", "outbox")}
    assert "CONVERT(VARCHAR(23), [processed_at], 121)" in statements["source"][0]

    sql, params = statements["purge_archived"]
    purge = parse_tsql(as_tsql_parameters(sql))
    assert isinstance(purge, exp.Delete)
    assert params == ['[[7, "2026-11-20T08:30:15.123"], [9, "2026-11-20T08:30:14.123"]]']
    # Row locks, and READPAST only ever together with READCOMMITTEDLOCK (RCSI refuses it
    # otherwise): here no READPAST at all, a locked row is waited for and re-checked.
    assert "WITH (ROWLOCK, READCOMMITTEDLOCK)" in sql and "READPAST" not in sql
    assert "OPENJSON(%s) WITH ([id] BIGINT '$[0]', [processed_at] DATETIME2(3) '$[1]')" in sql
    assert "a.[processed_at] = o.[processed_at]" in sql and "o.[status] IN (2, 4)" in sql


def test_tsql_range_purge_matches_golden_and_parses() -> None:
    """The purge of one id range of a run's frozen selection: row locks, committed rows
    read, and no more ids than SQL Server deletes in one statement."""
    dialect = MicrosoftDialect(TableName("outbox", "messaging"))
    run_range = replace(SELECTION, id_range=(4001, 8000))
    sql = dialect.closed_rows.purge_selection_sql(run_range)
    assert_golden("microsoft_history_range_purge.sql", f"-- purge_selection []\n{sql};\n")
    delete = parse_tsql(sql)
    assert isinstance(delete, exp.Delete)
    assert {(t.db, t.name) for t in delete.find_all(exp.Table)} == {("messaging", "outbox")}
    assert "WITH (ROWLOCK, READCOMMITTEDLOCK)" in sql and "READPAST" not in sql
    assert dialect.closed_rows.selection_condition(run_range) in sql
    assert dialect.closed_rows.max_purge_range_ids == 4_000


@pytest.mark.parametrize("vendor", ["postgresql", "mysql", "sqlite"])
def test_every_vendor_renders_the_same_selection(vendor: str) -> None:
    dialect = dialect_for(vendor, TableName("outbox"))
    condition = dialect.closed_rows.selection_condition(SELECTION)
    for part in ("IN (2, 4)", "<= 1000", ">= 1001", "<= 250000", "NOT ("):
        assert part in condition
    assert "2026-11-20 08:30:15.123" in condition and "2026-11-19 08:30:15.123" in condition


def _manifest(run_id: str, max_id: int, cutoff: dt.datetime, statuses: tuple[int, ...]) -> Manifest:
    return Manifest(run_id, cutoff, statuses, 1, max_id, Checksum(1, 1, 1), {"t": 1},
                    cutoff, {})


def test_archived_spans_drop_what_a_later_run_covers_and_manifests_round_trip() -> None:
    day = dt.timedelta(days=1)
    runs = [_manifest("20261101T000000Z-00000001", 100, CUTOFF, (2,)),
            _manifest("20261102T000000Z-00000002", 250, CUTOFF + day, (2,)),
            _manifest("20261103T000000Z-00000003", 300, CUTOFF + day, (4,)),
            _manifest("20261104T000000Z-00000004", 200, CUTOFF + 2 * day, (2, 4))]
    assert archived_spans(runs) == (ArchivedSpan(200, CUTOFF + 2 * day, (2, 4)),
                                    ArchivedSpan(250, CUTOFF + day, (2,)),
                                    ArchivedSpan(300, CUTOFF + day, (4,)))
    again = Manifest.from_json(runs[3].to_json(), "test")
    assert again == runs[3]


def test_a_manifest_naming_an_open_status_is_refused() -> None:
    text = _manifest("20261101T000000Z-00000001", 100, CUTOFF, (2,)).to_json()
    assert '"statuses": [\n    "done"\n  ]' in text
    with pytest.raises(HistoryError, match="'pending' is not a closed status"):
        Manifest.from_json(text.replace('"done"', '"pending"'), "test")


@pytest.mark.django_db(transaction=True)
def test_freeze_and_exact_purge_on_the_real_database() -> None:
    store = OutboxStore()
    now = store.utc_now()
    assert abs((now - timezone.now()).total_seconds()) < 60
    old = (now - dt.timedelta(days=3)).replace(microsecond=456000)
    rows = []
    for n, (status, processed) in enumerate([(Status.DONE, old)] * 6 + [(Status.DEAD, old)] * 2
                                            + [(Status.PENDING, None), (Status.FAILED, None),
                                               (Status.PENDING, None), (Status.DONE, now)]):
        rows.append(OutboxEvent(message_id=f"m{n}", topic="a" if n % 2 else "b",
                                aggregate_type="t", aggregate_id=str(n), payload="{}",
                                status=status, processed_at=processed, created_at=old))
    insert(rows)
    ids = list(OutboxEvent.objects.order_by("id").values_list("id", flat=True))

    cutoff = now - dt.timedelta(days=1)
    stats = store.selection_stats(ClosedRowSelection(statuses=(2, 4), before=cutoff))
    assert sorted((s.topic, s.status, s.rows) for s in stats) == [
        ("a", 2, 3), ("a", 4, 1), ("b", 2, 3), ("b", 4, 1)]
    closed = ids[:8]
    assert sum(s.id_sum for s in stats) == sum(closed)
    assert sum(s.id_mix for s in stats) == sum((i % 65521) * (i % 65519) for i in closed)
    assert min(s.min_id for s in stats) == ids[0] and max(s.max_id for s in stats) == ids[7]
    spans = (ArchivedSpan(ids[3], cutoff, (2,)),)
    rest = store.selection_stats(ClosedRowSelection(statuses=(2, 4), before=cutoff,
                                                    archived=spans))
    assert sum(s.rows for s in rest) == 4  # the done rows up to ids[3] are archived

    OutboxEvent.objects.filter(id=ids[5]).update(status=Status.PENDING, processed_at=None)
    archived = [(i, old) for i in ids[:8]]
    archived[4] = (ids[4], old + dt.timedelta(milliseconds=1))  # processed again since
    archived += [(i, old) for i in ids[8:11]]  # open rows never go
    # Done with the archived processed_at: ids[0..3]. Not ids[4] (processed again),
    # ids[5] (redriven), the dead ones (not asked for) nor the open ones.
    assert store.purge_archived(archived, statuses=(Status.DONE,)) == 4
    assert sorted(OutboxEvent.objects.values_list("id", flat=True)) == ids[4:]
    assert store.purge_archived(archived, statuses=(Status.DONE, Status.DEAD)) == 2
    assert sorted(OutboxEvent.objects.values_list("id", flat=True)) == ids[4:6] + ids[8:]
    assert store.purge_archived(archived, statuses=(Status.DONE, Status.DEAD)) == 0


@pytest.mark.django_db(transaction=True)
def test_the_exact_purge_keeps_each_delete_under_the_vendors_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SQL Server's bound (4,000 rows, below lock escalation) applies to the archive's
    purge as to outbox_purge, whatever --batch-size asked for; here a bound of 3."""
    store = OutboxStore()
    monkeypatch.setattr(store.dialect.purge, "max_delete_batch", 3)
    old = (timezone.now() - dt.timedelta(days=2)).replace(microsecond=456000)  # ms, as stored
    insert([OutboxEvent(message_id=f"m{n}", topic="a", aggregate_type="t",
                        aggregate_id=str(n), payload="{}", status=Status.DONE,
                        processed_at=old, created_at=old) for n in range(8)])
    archived = [(i, old) for i in OutboxEvent.objects.values_list("id", flat=True)]
    deletes: list[int] = []

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        if sql.lstrip().upper().startswith("DELETE"):
            deletes.append(context["cursor"].rowcount)
        return result

    with store.connection.execute_wrapper(count):
        assert store.purge_archived(archived, statuses=(Status.DONE,)) == 8
    assert deletes == [3, 3, 2]
    assert not OutboxEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_range_purge_deletes_only_when_the_rows_match_the_archive() -> None:
    """purge_selection deletes a range of a run's selection in one statement when its
    rows have the archive's count and checksum, and nothing when they do not."""
    store = OutboxStore()
    now = store.utc_now()
    old = (now - dt.timedelta(days=3)).replace(microsecond=456000)
    insert([OutboxEvent(message_id=f"m{n}", topic="a", aggregate_type="t", aggregate_id=str(n),
                        payload="{}", status=Status.DONE if n < 6 else Status.PENDING,
                        processed_at=old if n < 6 else None, created_at=old)
            for n in range(8)])
    ids = list(OutboxEvent.objects.order_by("id").values_list("id", flat=True))
    run = ClosedRowSelection(statuses=(2,), before=now - dt.timedelta(days=1),
                             id_range=(ids[0], ids[7]))

    def checksum(archived: list[int]) -> tuple[int, int, int]:
        return (len(archived), sum(archived), sum((i % 65521) * (i % 65519) for i in archived))

    # A row the archive lacks (or holds twice) makes the range differ: nothing goes.
    assert store.purge_selection(run, checksum(ids[:5])) is None
    assert store.purge_selection(run, checksum(ids[:6] + ids[:1])) is None
    assert OutboxEvent.objects.count() == 8
    # The first range checks out: its rows go in one statement, open rows stay.
    first = replace(run, id_range=(ids[0], ids[2]))
    assert store.purge_selection(first, checksum(ids[:3])) == 3
    assert sorted(OutboxEvent.objects.values_list("id", flat=True)) == ids[3:]
    # A row redriven after the archive read it leaves the selection: the range differs.
    OutboxEvent.objects.filter(id=ids[4]).update(status=Status.PENDING, processed_at=None)
    assert store.purge_selection(replace(run, id_range=(ids[3], ids[7])),
                                 checksum(ids[3:6])) is None
    assert OutboxEvent.objects.count() == 5
