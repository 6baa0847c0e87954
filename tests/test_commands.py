"""The management commands as a user runs them: flags, defaults, errors, output."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.test import override_settings
from django.utils import timezone

from eventferry_django import NewEvent, publish_events
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.publishers.memory import InMemoryPublisher


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def help_text(command: str) -> str:
    from django.core.management import load_command_class

    parser = load_command_class("eventferry_django", command).create_parser("manage.py", command)
    return parser.format_help()


def make_events(count: int, **update: object) -> list[str]:
    with transaction.atomic():
        ids = publish_events([NewEvent("orders", {"n": n}, "order", str(n)) for n in range(count)])
    if update:
        OutboxEvent.objects.filter(message_id__in=ids).update(**update)
    return ids


# -- outbox_relay ---------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_relay_until_empty_publishes_everything_and_reports() -> None:
    InMemoryPublisher.reset()
    make_events(7)
    out = run("outbox_relay", "--until-empty", "--batch-size", "3", "--relay-id", "r1")
    assert "relay r1: 7 published, 0 retried, 0 dead, 0 released" in out
    assert len(InMemoryPublisher.sent) == 7
    assert OutboxEvent.objects.done().count() == 7


@pytest.mark.django_db(transaction=True)
def test_relay_once_and_max_events() -> None:
    InMemoryPublisher.reset()
    make_events(5)
    run("outbox_relay", "--once", "--batch-size", "2")
    assert len(InMemoryPublisher.sent) == 2
    run("outbox_relay", "--max-events", "2", "--batch-size", "10")
    assert len(InMemoryPublisher.sent) == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch-size", "0"], "0 is out of range (1..10,000)"),
        (["--batch-size", "10001"], "10001 is out of range (1..10,000)"),
        (["--batch-size", "many"], "'many' is not a whole number"),
        (["--poll-interval", "-1"], "'-1' must be a positive number of seconds"),
        (["--max-events", "0"], "0 is out of range (at least 1)"),
        (["--batches-in-flight", "9"], "9 is out of range (1..8)"),
        (["--database", "nope"], "Unknown database alias 'nope'"),
        (["--once", "--until-empty"], "--once and --until-empty exclude each other"),
    ],
)
def test_relay_bad_flags_are_command_errors(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run("outbox_relay", *args)


def test_help_shows_defaults() -> None:
    relay_help = help_text("outbox_relay")
    assert "EVENTFERRY['BATCH_SIZE'], 500 unless set" in relay_help
    assert "EVENTFERRY['BATCHES_IN_FLIGHT'], 2 unless set" in relay_help
    assert "(default: 1.0)" in relay_help
    purge_help = help_text("outbox_purge")
    assert "(default: done)" in purge_help and "(default: 1000" in purge_help


# -- outbox_purge ---------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_purge_dry_run_then_real() -> None:
    old = timezone.now() - dt.timedelta(days=10)
    make_events(4, status=Status.DONE, processed_at=old)
    make_events(2, status=Status.DEAD, processed_at=old)
    make_events(3)  # pending: never purged
    assert "Would delete 4 done row(s)" in run("outbox_purge", "--older-than", "7d", "--dry-run")
    assert OutboxEvent.objects.count() == 9
    assert "Deleted 4 done row(s)" in run("outbox_purge", "--older-than", "7d")
    assert "Deleted 0 done row(s)" in run("outbox_purge", "--older-than", "7d")
    assert "Deleted 2 both row(s)" in run("outbox_purge", "--older-than", "0s", "--status", "both")
    assert OutboxEvent.objects.pending().count() == 3 and OutboxEvent.objects.count() == 3


@pytest.mark.django_db(transaction=True)
def test_purge_batches_and_soft_cap() -> None:
    make_events(25, status=Status.DONE, processed_at=timezone.now() - dt.timedelta(hours=2))
    out = run("outbox_purge", "--older-than", "90m", "--batch-size", "10", "--max-rows", "15")
    assert "Deleted 20 done row(s)" in out
    assert OutboxEvent.objects.count() == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "the following arguments are required: --older-than"),
        (["--older-than", "7"], "'7' is not a duration"),
        (["--older-than", "7y"], "'7y' is not a duration"),
        (["--older-than", "1d", "--status", "pending"], "invalid choice: 'pending'"),
        (["--older-than", "1d", "--batch-size", "0"], "0 is out of range"),
        (["--older-than", "1d", "--database", "x"], "Unknown database alias 'x'"),
        (["--older-than", "99999999999d"],
         r"'99999999999d' is longer than the largest duration accepted, 36500d \(100 years\)"),
        (["--older-than", "1000000d"], r"'1000000d' is longer than the largest duration"),
        (["--older-than", "5215w"], r"'5215w' is longer than the largest duration"),
        (["--older-than", "9" * 5000 + "s"], r"is longer than the largest duration accepted"),
    ],
)
def test_purge_bad_flags_are_command_errors(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("outbox_purge", *args)


# -- outbox_redrive -------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_redrive_dead_rows_by_filters_with_a_dry_run() -> None:
    now = timezone.now()
    dead = make_events(3, status=Status.DEAD, attempts=5, last_error="broker said 406",
                       processed_at=now)
    failed = make_events(2, status=Status.FAILED, attempts=2, last_error="timeout",
                         next_retry_at=now + dt.timedelta(hours=1))
    out = run("outbox_redrive", "--error-contains", "406", "--dry-run")
    assert "Would redrive 3 event(s)." in out and "broker said 406" in out
    assert OutboxEvent.objects.dead().count() == 3

    assert "Redrove 3 event(s)." in run("outbox_redrive", "--topic", "orders")
    redriven = OutboxEvent.objects.filter(message_id__in=dead)
    assert {(e.status, e.attempts, e.last_error, e.next_retry_at, e.processed_at)
            for e in redriven} == {(Status.PENDING, 0, None, None, None)}
    # Failed rows only move when asked.
    assert OutboxEvent.objects.filter(message_id__in=failed, status=Status.FAILED).count() == 2
    assert "Redrove 2 event(s)." in run("outbox_redrive", "--topic", "orders",
                                        "--include-failed")


@pytest.mark.django_db(transaction=True)
def test_redrive_by_id_aggregate_and_time() -> None:
    ids = make_events(4, status=Status.DEAD, processed_at=timezone.now())
    rows = list(OutboxEvent.objects.filter(message_id__in=ids).order_by("id"))
    assert "Redrove 1 event(s)." in run("outbox_redrive", "--id", str(rows[0].id))
    assert "Redrove 1 event(s)." in run("outbox_redrive", "--aggregate-id", rows[1].aggregate_id)
    assert "Redrove 0 event(s)." in run("outbox_redrive", "--since", "2999-01-01T00:00")
    assert "Redrove 2 event(s)." in run("outbox_redrive", "--since", "1h", "--until",
                                        (timezone.now() + dt.timedelta(minutes=1)).isoformat())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "Say which events to redrive"),
        (["--id", "x"], "'x' is not a whole number"),
        (["--since", "yesterday"], "'yesterday' is neither an ISO 8601 date-time"),
        (["--since", "1h", "--until", "2h"], "--since must be earlier than --until"),
        (["--since", "1000000d"], r"'1000000d' is longer than the largest duration accepted"),
    ],
)
@pytest.mark.django_db
def test_redrive_bad_flags_are_command_errors(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run("outbox_redrive", *args)


# -- outbox_sql -----------------------------------------------------------------------
def test_outbox_sql_defaults_to_the_database_vendor() -> None:
    out = run("outbox_sql")
    expected = {"sqlite": 'CREATE TABLE IF NOT EXISTS "outbox"',
                "postgresql": 'CREATE TABLE IF NOT EXISTS "outbox"',
                "mysql": "CREATE TABLE IF NOT EXISTS `outbox`",
                "microsoft": "CREATE TABLE [dbo].[outbox]"}[connection.vendor]
    assert expected in out


def test_outbox_sql_for_a_dba() -> None:
    out = run("outbox_sql", "--vendor", "microsoft", "--schema", "messaging", "--table", "events",
              "--native-json")
    assert "IF OBJECT_ID(N'[messaging].[events]', N'U') IS NULL" in out
    assert "[payload] JSON NOT NULL" in out and "ISJSON" not in out
    # Newest release first: 0.2.0's constraint, then 0.1.0's table.
    assert run("outbox_sql", "--vendor", "microsoft", "--reverse").strip() == (
        "ALTER TABLE [dbo].[outbox] DROP CONSTRAINT IF EXISTS [CK_outbox_claimed_needs_0_2];"
        "\nDROP TABLE IF EXISTS [dbo].[outbox];")
    with pytest.raises(CommandError, match="invalid choice: 'oracle'"):
        run("outbox_sql", "--vendor", "oracle")


def test_outbox_sql_prints_the_optional_sequential_key_tuning_for_sql_server_only() -> None:
    out = run("outbox_sql", "--vendor", "microsoft", "--inbox", "--optimize-sequential-key")
    assert "ALTER INDEX [PK_inbox] ON [dbo].[inbox] SET (OPTIMIZE_FOR_SEQUENTIAL_KEY = ON)" in out
    off = run("outbox_sql", "--vendor", "microsoft", "--optimize-sequential-key", "--reverse")
    assert "ON [dbo].[outbox] SET (OPTIMIZE_FOR_SEQUENTIAL_KEY = OFF)" in off
    with pytest.raises(CommandError, match="--optimize-sequential-key is SQL Server's"):
        run("outbox_sql", "--vendor", "postgresql", "--optimize-sequential-key")


def test_outbox_sql_prints_release_0_1_0_whole_then_0_2_0() -> None:
    first = run("outbox_sql", "--vendor", "postgresql", "--schema", "messaging",
                "--release", "0.1.0")
    # One table with every column and index of 0.1.0: nothing left for a later step.
    assert '"bucket" SMALLINT NULL' in first and '"schema_version" VARCHAR(255) NULL' in first
    assert "autovacuum_vacuum_scale_factor = 0" in first
    assert [line.split(" ON ")[0] for line in first.splitlines() if "CREATE INDEX" in line] == [
        f'CREATE INDEX IF NOT EXISTS "IX_outbox_{index}"'
        for index in ("agg_open", "claim_ready", "closed_rows", "bucket_fresh")]
    then = run("outbox_sql", "--vendor", "postgresql", "--schema", "messaging",
               "--release", "0.2.0")
    assert '"CK_outbox_claimed_needs_0_2"' in then and "CREATE INDEX" not in then
    assert run("outbox_sql", "--vendor", "postgresql", "--schema", "messaging") == first + then
    with pytest.raises(CommandError, match=r"invalid choice: '0\.0\.9'"):
        run("outbox_sql", "--vendor", "postgresql", "--release", "0.0.9")


def test_outbox_sql_prints_the_relay_registry_beside_its_outbox() -> None:
    out = run("outbox_sql", "--vendor", "microsoft", "--schema", "messaging", "--table", "events",
              "--relay-registry")
    assert "IF OBJECT_ID(N'[messaging].[events_relays]', N'U') IS NULL" in out
    assert "CONSTRAINT [UQ_events_relays_instance] UNIQUE ([instance])" in out
    assert run("outbox_sql", "--vendor", "postgresql", "--relay-registry", "--reverse").strip() == (
        'DROP TABLE IF EXISTS "outbox_relays";')
    with pytest.raises(CommandError, match="pick one"):
        run("outbox_sql", "--vendor", "postgresql", "--inbox", "--relay-registry")
    with pytest.raises(CommandError, match="concerns the outbox and the inbox"):
        run("outbox_sql", "--vendor", "microsoft", "--relay-registry",
            "--optimize-sequential-key")


def test_outbox_sql_refuses_a_schema_for_sqlite() -> None:
    """As the settings check does (eventferry.E014): SQLite has no schemas."""
    with pytest.raises(CommandError, match=r"SQLite has no schemas: --schema 'X' cannot be used"):
        run("outbox_sql", "--vendor", "sqlite", "--schema", "X")
    with override_settings(EVENTFERRY={"SCHEMA": "messaging"}), pytest.raises(
        CommandError, match=r"SQLite has no schemas: EVENTFERRY\['SCHEMA'\] 'messaging' cannot"
    ):
        run("outbox_sql", "--vendor", "sqlite")
    assert '"outbox"' in run("outbox_sql", "--vendor", "sqlite")
    assert "[messaging].[outbox]" in run("outbox_sql", "--vendor", "microsoft", "--schema",
                                         "messaging")


@pytest.mark.django_db
def test_the_largest_duration_is_accepted() -> None:
    assert "Would delete 0 done row(s)" in run("outbox_purge", "--older-than", "36500d",
                                               "--dry-run")
    assert "Would delete 0 done row(s)" in run("outbox_purge", "--older-than", "5214w",
                                               "--dry-run")
    assert "Would redrive 0 event(s)." in run("outbox_redrive", "--since", "876000h",
                                              "--dry-run")
