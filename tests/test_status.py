"""``eventferry_django.status`` and ``manage.py outbox_status`` on the real database:
the numbers, the output formats, and (PostgreSQL, SQLite, MariaDB) that the queries are
served by the indexes rather than by scanning done rows."""

from __future__ import annotations

import datetime as dt
import io
import json
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from eventferry_django import NewEvent, publish_events
from eventferry_django.contract import STATUS_NAMES
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.status import outbox_status
from eventferry_django.store.claimable import PROBE_COLUMNS
from eventferry_django.store.in_flight_journal import InFlightJournal

pytestmark = pytest.mark.django_db


def test_the_models_labels_are_the_contracts_names_untranslated() -> None:
    """The admin's labels are the one code-to-name map of contract.py, spelled again only
    because translation catalogues need literals."""
    from django.utils import translation

    with translation.override(None):
        assert {int(status): str(status.label) for status in Status} == STATUS_NAMES

HOUR = dt.timedelta(hours=1)


def add(topic: str, aggregate: str, **fields: object) -> OutboxEvent:
    """One outbox row written by publish_event, then moved to the given state."""
    with transaction.atomic():
        (message_id,) = publish_events([NewEvent(topic, {"a": aggregate}, "order", aggregate)])
    if fields:
        OutboxEvent.objects.filter(message_id=message_id).update(**fields)
    return OutboxEvent.objects.get(message_id=message_id)


def in_flight(row: OutboxEvent) -> OutboxEvent:
    """``row`` put in a relay's batch in flight, as a claim does: its status stays."""
    with transaction.atomic(), connection.cursor() as cursor:
        InFlightJournal().record(cursor, "b:status-test", row.id, [row.id])
    return row


def done(at: dt.datetime, **fields: object) -> dict[str, object]:
    return {"status": Status.DONE, "processed_at": at, **fields}


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("outbox_status", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_an_empty_outbox() -> None:
    status = outbox_status()
    assert status.database == "default"
    assert dict(status.backlog) == {"pending": 0, "scheduled": 0, "claimed": 0, "failed": 0}
    assert status.dead == 0
    assert status.oldest_pending_created_at is None
    assert status.oldest_pending_age_seconds is None
    assert status.last_published_at is None
    assert status.by_topic is None
    assert outbox_status(by_topic=True).by_topic == {}


def test_counts_open_and_dead_rows_by_status_and_topic_but_never_done_ones() -> None:
    now = timezone.now()
    oldest = add("orders", "1", created_at=now - 2 * HOUR)
    add("orders", "2")
    in_flight(add("orders", "3"))
    add("payments", "4", status=Status.FAILED, attempts=1, next_retry_at=now + HOUR)
    add("payments", "5", status=Status.DEAD, processed_at=now, attempts=5)
    add("payments", "6", status=Status.DEAD, processed_at=now, attempts=5)
    add("audit", "7", status=Status.DEAD, processed_at=now, attempts=5)
    add("orders", "8", **done(now - HOUR))
    latest = add("shipping", "9", **done(now - dt.timedelta(minutes=5)))

    status = outbox_status(by_topic=True)

    assert dict(status.backlog) == {"pending": 2, "scheduled": 0, "claimed": 1, "failed": 1}
    assert status.dead == 3
    assert status.oldest_pending_created_at == oldest.created_at
    assert status.oldest_pending_age_seconds == pytest.approx(2 * 3600, abs=60)
    assert status.last_published_at == latest.processed_at
    assert status.last_published_age_seconds == pytest.approx(300, abs=60)
    # Topics with open or dead rows only ("shipping" has only a done row), sorted.
    assert status.by_topic == {
        "audit": {"pending": 0, "scheduled": 0, "claimed": 0, "failed": 0, "dead": 1},
        "orders": {"pending": 2, "scheduled": 0, "claimed": 1, "failed": 0, "dead": 0},
        "payments": {"pending": 0, "scheduled": 0, "claimed": 0, "failed": 1, "dead": 2},
    }


def test_oldest_pending_is_the_earliest_enqueued_row_without_a_retry_time() -> None:
    now = timezone.now()
    # A pending row with a retry time (the claim honours those; nothing writes them
    # today) does not hide an older-enqueued row without one, and vice versa.
    add("t", "1", next_retry_at=now + HOUR, created_at=now - 3 * HOUR)
    first_fresh = add("t", "2", created_at=now - 2 * HOUR)
    add("t", "3", created_at=now - HOUR)
    assert outbox_status().oldest_pending_created_at == first_fresh.created_at

    # Without any, the pending row due first stands in.
    OutboxEvent.objects.filter(next_retry_at__isnull=True).update(**done(now))
    delayed = OutboxEvent.objects.get(aggregate_id="1")
    assert outbox_status().oldest_pending_created_at == delayed.created_at

    # Failed rows are not pending.
    OutboxEvent.objects.filter(pk=delayed.pk).update(status=Status.FAILED, attempts=1)
    assert outbox_status().oldest_pending_created_at is None


def test_ages_clamp_at_zero_when_the_database_clock_is_ahead() -> None:
    add("t", "1", created_at=timezone.now() + HOUR)
    assert outbox_status().oldest_pending_age_seconds == 0.0


def test_unknown_alias_is_a_command_error() -> None:
    with pytest.raises(CommandError, match="Unknown database alias 'nope'"):
        run("--database", "nope")


def test_json_output_has_stable_keys_and_values() -> None:
    now = timezone.now()
    add("orders", "1", created_at=now - HOUR)
    add("orders", "2", status=Status.DEAD, processed_at=now, attempts=5)
    add("orders", "3", **done(now))

    data = json.loads(run("--json"))

    assert sorted(data) == [
        "backlog", "checked_at", "database", "dead", "last_published_age_seconds",
        "last_published_at", "oldest_claimable_age_seconds", "oldest_claimable_since",
        "oldest_pending_age_seconds", "oldest_pending_created_at", "topics",
    ]
    assert data["database"] == "default"
    assert data["backlog"] == {"pending": 1, "scheduled": 0, "claimed": 0, "failed": 0}
    assert data["dead"] == 1
    assert data["topics"] == {"orders": {"pending": 1, "scheduled": 0, "claimed": 0,
                                         "failed": 0, "dead": 1}}
    assert 3500 < data["oldest_claimable_age_seconds"] < 3700
    assert 3500 < data["oldest_pending_age_seconds"] < 3700
    for key in ("checked_at", "oldest_pending_created_at", "last_published_at"):
        parsed = dt.datetime.fromisoformat(data[key])
        assert parsed.utcoffset() == dt.timedelta(0)


def test_json_output_of_an_empty_outbox() -> None:
    data = json.loads(run("--json", "--database", "default"))
    assert data["backlog"] == {"pending": 0, "scheduled": 0, "claimed": 0, "failed": 0}
    assert data["dead"] == 0
    assert data["topics"] == {}
    assert data["oldest_pending_created_at"] is None
    assert data["oldest_pending_age_seconds"] is None
    assert data["last_published_at"] is None


def test_table_output() -> None:
    now = timezone.now()
    add("orders", "1", created_at=now - 2 * HOUR - dt.timedelta(minutes=3))
    in_flight(add("order.shipped.with.a.long.name", "2"))
    add("orders", "3", status=Status.DEAD, processed_at=now, attempts=5)
    add("orders", "4", **done(now - dt.timedelta(seconds=42)))

    out = run()

    assert out.startswith("Outbox on database 'default', ")
    assert re.search(r"^  pending +1$", out, re.M)
    assert re.search(r"^  claimed +1$", out, re.M)
    assert re.search(r"^  failed +0$", out, re.M)
    assert re.search(r"^  dead +1$", out, re.M)
    assert re.search(r"^  oldest pending +\S+ \(2h 0[23]m ago\)$", out, re.M)
    assert re.search(r"^  oldest claimable +\S+ \(2h 0[23]m ago\)$", out, re.M)
    assert re.search(r"^  last published +\S+ \(4[0-9]s ago\)$", out, re.M)
    assert re.search(r"^  topic +pending +scheduled +claimed +failed +dead$", out, re.M)
    assert re.search(r"^  order\.shipped\.with\.a\.long\.name +0 +0 +1 +0 +0$", out, re.M)
    assert re.search(r"^  orders +1 +0 +0 +0 +1$", out, re.M)


def test_table_output_of_an_empty_outbox() -> None:
    out = run()
    assert re.search(r"^  oldest pending +none$", out, re.M)
    assert re.search(r"^  oldest claimable +none$", out, re.M)
    assert re.search(r"^  last published +never$", out, re.M)
    assert "topic" not in out


def test_help_shows_the_defaults() -> None:
    from django.core.management import load_command_class

    parser = load_command_class("eventferry_django", "outbox_status").create_parser(
        "manage.py", "outbox_status")
    text = " ".join(parser.format_help().split())
    assert "--json" in text and "(default: a table)" in text
    assert "--database" in text and "default: EVENTFERRY['DATABASE']" in text


# -- the query plans ---------------------------------------------------------------------
DONE_ROWS = 30_000


def fill_with_history() -> None:
    """Many done rows and a few open and dead ones, with fresh statistics."""
    with transaction.atomic():
        publish_events([NewEvent(f"t{n % 10}", {}, "a", str(n % 1000))
                        for n in range(DONE_ROWS)])
    OutboxEvent.objects.update(status=Status.DONE, processed_at=timezone.now() - HOUR)
    for n in range(30):
        add(f"t{n % 3}", f"open-{n}")
    add("t1", "failed", status=Status.FAILED, attempts=1, next_retry_at=timezone.now())
    in_flight(add("t1", "claimed"))
    add("t2", "dead", status=Status.DEAD, processed_at=timezone.now(), attempts=5)
    with connection.cursor() as cursor:
        table = connection.ops.quote_name(OutboxEvent._meta.db_table)
        cursor.execute(f"ANALYZE TABLE {table}" if connection.vendor == "mysql"
                       else f"ANALYZE {table}")


def status_queries() -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        status = outbox_status()
    assert dict(status.backlog) == {"pending": 30, "scheduled": 0, "claimed": 1, "failed": 1}
    assert status.dead == 1
    return [query["sql"] for query in captured.captured_queries]


def plan(sql: str) -> str:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("EXPLAIN (COSTS OFF) " + sql)
            return "\n".join(row[0] for row in cursor.fetchall())
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            return "\n".join(row[-1] for row in cursor.fetchall())
        cursor.execute("EXPLAIN " + sql)
        columns = [c[0] for c in cursor.description]
        return "\n".join(repr(dict(zip(columns, row, strict=True)))
                         for row in cursor.fetchall())


def plans_by_query() -> dict[str, str]:
    """``{what: plan}`` for the collector's queries (``outbox_status()``)."""
    plans: dict[str, str] = {}
    probes = iter(PROBE_COLUMNS)
    for sql in status_queries():
        if (not sql.lstrip().upper().startswith("SELECT") or "_in_flight" in sql
                or "set_config(" in sql or re.search(r"id\W* IN \(", sql)):
            # The batches in flight (a few rows per relay, read in a transaction of their
            # own) and their rows, counted by primary key: no range of the outbox that
            # done rows could lengthen.
            continue
        if " AS c WHERE " in sql:
            what = f"claimable {next(probes)}"
        elif "GROUP BY" in sql:
            what = "open counts"
        elif "COUNT(*)" in sql and "next_retry_at" in sql:
            what = "scheduled count"
        elif "COUNT(*)" in sql:
            what = "dead count"
        elif "processed_at" in sql.split("FROM")[0]:
            what = "last published"
        else:
            what = "oldest pending"
        assert what not in plans, sql
        plans[what] = f"{sql}\n{plan(sql)}"
    assert sorted(plans) == sorted([
        "dead count", "last published", "oldest pending", "open counts", "scheduled count",
        *(f"claimable {kind}" for kind in PROBE_COLUMNS)])
    return plans


@pytest.mark.django_db(transaction=True)  # MariaDB's ANALYZE TABLE commits
@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_postgresql_serves_the_status_from_the_indexes() -> None:
    fill_with_history()
    plans = plans_by_query()
    for what, text in plans.items():
        assert "Seq Scan" not in text, text
        if what.startswith("claimable"):
            # The claim's own scans: over the indexes of open rows only, whichever the
            # planner takes for 32 open rows (test_scheduled_plans.py measures them
            # among 20,000 scheduled rows).
            assert not re.search(r"on \"?IX_outbox_(closed_rows|done_processed_at)", text), text
        elif what not in ("open counts", "scheduled count"):
            assert "Bitmap Heap Scan" not in text, text
    # Open rows: one of the indexes over open rows only, so the done rows cost nothing
    # (the retention index holds closed rows only).
    assert re.search(r"(Index (Only )?Scan|Bitmap Index Scan) on \"?IX_outbox_"
                     r"(claim_ready|agg_open)|Index (Only )?Scan using \"?IX_outbox_"
                     r"(claim_ready|agg_open)", plans["open counts"]), plans["open counts"]
    assert re.search(r"Index Only Scan using \"?IX_outbox_closed_rows\"? .*\n.*"
                     r"Index Cond: \(status = 4\)", plans["dead count"]), plans["dead count"]
    # One probe: the claim index read in its own order, no sort of the pending rows.
    oldest = plans["oldest pending"]
    assert "Limit" in oldest and "Sort" not in oldest, oldest
    assert re.search(r"Index Scan using \"?IX_outbox_claim_ready", oldest), oldest
    assert re.search(r"Index (Only )?Scan Backward using \"?IX_outbox_closed_rows",
                     plans["last published"]), plans["last published"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif("connection.vendor != 'sqlite'")
def test_sqlite_serves_the_status_from_the_indexes() -> None:
    fill_with_history()
    plans = plans_by_query()
    for text in plans.values():
        assert re.search(r"\nSEARCH \S+ USING (COVERING )?INDEX IX_outbox_", text), text
        assert "\nSCAN" not in text, text
    assert "TEMP B-TREE" not in plans["oldest pending"], plans["oldest pending"]
    assert "IX_outbox_claim_ready" in plans["oldest pending"], plans["oldest pending"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif("connection.vendor != 'mysql'")
def test_mariadb_serves_the_status_from_the_indexes() -> None:
    fill_with_history()
    plans = plans_by_query()
    for text in plans.values():
        assert "'type': 'ALL'" not in text, text
        assert re.search(r"'key': 'IX_outbox_(claim_ready|done_processed_at)'", text), text
    assert "filesort" not in plans["oldest pending"], plans["oldest pending"]
    assert "'key': 'IX_outbox_claim_ready'" in plans["oldest pending"], plans["oldest pending"]
