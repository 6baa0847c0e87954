"""The inbox on a real database: a message's effects happen once, commit or roll back with
its record, and a concurrent second delivery waits for the first and then skips."""

from __future__ import annotations

import datetime as dt
import io
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections, transaction
from django.test import override_settings
from django.utils import timezone

from eventferry_django.ddl import create_statements
from eventferry_django.exceptions import InvalidMessage, NotInTransaction
from eventferry_django.inbox import DUPLICATE, handle_once, record_message
from eventferry_django.maintenance import purge_inbox
from eventferry_django.models import InboxMessage
from eventferry_django.naming import TableName

from .engine_gaps import babelfish_gap
from .testapp.models import Shipment

#: mssql-django inserts a row with "SET NOCOUNT ON; INSERT ...; SELECT SCOPE_IDENTITY()";
#: SQL Server restores NOCOUNT when that parameterized batch returns, the endpoint leaves
#: it on, and the inbox's INSERT then reports a row count of -1 (read as a duplicate).
NOCOUNT_GAP = babelfish_gap("prepared-batch-set-leaks",
                            "an earlier ORM insert leaves NOCOUNT on: the inbox row count reads -1")

pytestmark = pytest.mark.django_db(transaction=True)


@handle_once("shipping")
def ship(message_id: str, reference: str, *, fail: bool = False) -> str:
    Shipment.objects.create(order_reference=reference)
    if fail:
        raise RuntimeError("the handler failed after writing")
    return f"shipped {reference}"


def records() -> list[tuple[str, str]]:
    return sorted(InboxMessage.objects.values_list("consumer", "message_id"))


@NOCOUNT_GAP
def test_a_message_is_handled_once_and_its_result_returned() -> None:
    assert ship("m-1", "SO-1") == "shipped SO-1"
    assert ship("m-1", "SO-1") is DUPLICATE
    assert ship(message_id="m-1", reference="SO-1") is DUPLICATE
    assert ship("m-2", "SO-2") == "shipped SO-2"
    assert list(Shipment.objects.values_list("order_reference", flat=True)) == ["SO-1", "SO-2"]
    assert records() == [("shipping", "m-1"), ("shipping", "m-2")]
    row = InboxMessage.objects.get(message_id="m-1")
    assert abs((timezone.now() - row.handled_at).total_seconds()) < 60


@NOCOUNT_GAP
def test_a_failing_handler_rolls_back_its_record_with_its_writes() -> None:
    with pytest.raises(RuntimeError, match="failed after writing"):
        ship("m-1", "SO-1", fail=True)
    assert not Shipment.objects.exists()
    assert records() == []
    # The redelivery is handled: the first attempt left nothing behind.
    assert ship("m-1", "SO-1") == "shipped SO-1"
    assert Shipment.objects.count() == 1


@NOCOUNT_GAP
def test_each_consumer_handles_a_message_once_on_its_own() -> None:
    @handle_once("billing")
    def bill(message_id: str) -> None:
        Shipment.objects.create(order_reference="billed")

    ship("m-1", "SO-1")
    bill("m-1")
    bill("m-1")
    assert records() == [("billing", "m-1"), ("shipping", "m-1")]
    assert Shipment.objects.count() == 2


def test_inside_a_callers_transaction_the_record_commits_with_it() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        ship("m-1", "SO-1")
        raise RuntimeError("the caller rolls back")
    assert records() == [] and not Shipment.objects.exists()


def test_message_id_argument_is_found_by_name_or_refused_at_decoration() -> None:
    @handle_once("audit", message_id_arg="delivery_tag")
    def audit(body: dict[str, Any], delivery_tag: str) -> str:
        return "audited"

    assert audit({"x": 1}, "tag-1") == "audited"
    assert audit({"x": 1}, delivery_tag="tag-1") is DUPLICATE
    with pytest.raises(TypeError, match=r"no parameter 'message_id'"):
        handle_once("audit")(lambda body: None)


@pytest.mark.parametrize(("consumer", "message_id", "error"), [
    ("shipping", "", "message_id: must be a non-empty string"),
    ("shipping", None, "message_id: must be a non-empty string, got None"),
    ("shipping", "x" * 65, "message_id: is longer than 64 characters"),
    ("shipping", "\U0001f600" * 33, "message_id: is longer than 64 characters"),
    ("shipping", "a\x00b", "message_id: contains a NUL character"),
    ("shipping", "a\ud800", "message_id: contains a lone surrogate"),
    ("", "m-1", "consumer: must be a non-empty string"),
    ("c" * 256, "m-1", "consumer: is longer than 255 characters"),
])
def test_unstorable_ids_are_refused_before_anything_is_written(
    consumer: Any, message_id: Any, error: str
) -> None:
    with pytest.raises(InvalidMessage, match=error), transaction.atomic():
        record_message(consumer, message_id)
    assert records() == []
    # The longest ids that fit are stored whole.
    with transaction.atomic():
        assert record_message("c" * 255, "\U0001f600" * 32)
    assert InboxMessage.objects.get().message_id == "\U0001f600" * 32


def test_recording_in_autocommit_is_refused() -> None:
    with pytest.raises(NotInTransaction, match=r"record_message\(\) must run inside "
                       r"transaction.atomic\(using='default'\)"):
        record_message("shipping", "m-1")
    assert records() == []


@NOCOUNT_GAP
def test_duplicates_are_counted_by_consumer() -> None:
    from prometheus_client import REGISTRY

    def sample(name: str) -> float:
        return REGISTRY.get_sample_value(name, {"consumer": "shipping"}) or 0.0

    handled, duplicates = (sample("eventferry_inbox_handled_total"),
                           sample("eventferry_inbox_duplicates_total"))
    ship("m-1", "SO-1")
    ship("m-1", "SO-1")
    ship("m-1", "SO-1")
    with pytest.raises(RuntimeError):
        ship("m-2", "SO-2", fail=True)  # rolled back: neither handled nor a duplicate
    assert sample("eventferry_inbox_handled_total") == handled + 1
    assert sample("eventferry_inbox_duplicates_total") == duplicates + 2


# -- two deliveries at once -----------------------------------------------------------------

def in_thread(work: Callable[[], object]) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``work`` on a thread of its own, hence a database connection of its own."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
            outcome["finished"] = time.monotonic()
        except BaseException as exc:  # reported by the test
            outcome["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


@babelfish_gap("locking-hints-ignored", "UPDLOCK, HOLDLOCK on the inbox probe do not make the second delivery wait: it fails on the unique key")
@pytest.mark.parametrize("first_commits", [True, False])
def test_a_concurrent_delivery_waits_for_the_first_then_skips_or_handles(
    first_commits: bool,
) -> None:
    def second_delivery() -> bool:
        with transaction.atomic():
            return record_message("shipping", "m-1")

    with transaction.atomic():
        assert record_message("shipping", "m-1")
        Shipment.objects.create(order_reference="first")
        thread, outcome = in_thread(second_delivery)
        # The second delivery cannot get past the first's uncommitted record.
        time.sleep(0.5)
        assert thread.is_alive() and not outcome
        released = time.monotonic()
        if not first_commits:
            transaction.set_rollback(True)
    thread.join(10)
    assert "error" not in outcome, outcome.get("error")
    assert outcome["finished"] >= released
    # Committed: the second delivery is a duplicate. Rolled back: it is the first.
    assert outcome["result"] is (not first_commits)
    assert records() == [("shipping", "m-1")]
    assert Shipment.objects.count() == (1 if first_commits else 0)


# -- retention ------------------------------------------------------------------------------

def age_records(days: int, *message_ids: str) -> None:
    InboxMessage.objects.filter(message_id__in=message_ids).update(
        handled_at=timezone.now() - dt.timedelta(days=days))


def test_purge_deletes_old_records_in_batches_and_by_consumer() -> None:
    for n in range(7):
        with transaction.atomic():
            record_message("shipping" if n < 5 else "billing", f"m-{n}")
    age_records(40, *[f"m-{n}" for n in range(6)])
    seen: list[int] = []

    dry = purge_inbox(dt.timedelta(days=30), consumer="billing", dry_run=True)
    assert (dry.rows, dry.dry_run) == (1, True)
    assert purge_inbox(dt.timedelta(days=30), consumer="billing").rows == 1
    result = purge_inbox(dt.timedelta(days=30), batch_size=2, progress=seen.append)
    assert result.rows == 5 and seen == [2, 4, 5]
    # The recent one is kept, whoever's it is.
    assert records() == [("billing", "m-6")]


def test_outbox_purge_inbox_command() -> None:
    for n in range(3):
        with transaction.atomic():
            record_message("shipping", f"m-{n}")
    age_records(31, "m-0", "m-1")

    def run(*args: str) -> str:
        out = io.StringIO()
        call_command("outbox_purge", *args, stdout=out)
        return out.getvalue()

    assert "Would delete 2 inbox record(s) of messages handled before" in run(
        "--inbox", "--older-than", "30d", "--dry-run")
    assert "Deleted 2 inbox record(s)" in run("--inbox", "--older-than", "30d",
                                              "--batch-size", "1")
    assert records() == [("shipping", "m-2")]
    with pytest.raises(CommandError, match="--status selects outbox rows"):
        run("--inbox", "--older-than", "30d", "--status", "dead")
    with pytest.raises(CommandError, match="--consumer needs --inbox"):
        run("--older-than", "30d", "--consumer", "shipping")


def test_a_custom_inbox_table_is_created_and_used() -> None:
    name = TableName("handled_messages", role="Inbox")
    with override_settings(EVENTFERRY={"INBOX_TABLE": name.table}):
        with connection.cursor() as cursor:
            for statement in create_statements(connection.vendor, "inbox"):
                cursor.execute(statement)
        try:
            with transaction.atomic():
                assert record_message("shipping", "m-1")
            with transaction.atomic():
                assert not record_message("shipping", "m-1")
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT consumer, message_id FROM {name.quoted(connection.vendor)}")
                assert list(cursor.fetchall()) == [("shipping", "m-1")]
        finally:
            with connection.cursor() as cursor:
                cursor.execute(f"DROP TABLE {name.quoted(connection.vendor)}")
    assert records() == []
