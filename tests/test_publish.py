"""publish_event() against a real database: atomicity, after-commit effects, validation."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.db import DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.test import override_settings

from eventferry_django import NewEvent, RawJSON, publish_event, publish_events
from eventferry_django.conf import get_settings
from eventferry_django.exceptions import InvalidEvent, NotInTransaction
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.signals import events_committed
from eventferry_django.store import dialect_for
from eventferry_django.store.outbox import OutboxStore

from .engine_gaps import babelfish_gap
from .testapp.models import Order


def count_seen_by(other: BaseDatabaseWrapper, message_id: str) -> int:
    """How many rows with ``message_id`` a different connection can see."""
    settings = get_settings()
    table = dialect_for(other.vendor, settings.table_name).table
    with other.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE message_id = %s", [message_id])
        return int(cursor.fetchone()[0])


def place_order(reference: str) -> str:
    Order.objects.create(reference=reference, total=Decimal("12.50"))
    return publish_event(
        "order.created",
        {"reference": reference, "total": Decimal("12.50")},
        aggregate_type="order",
        aggregate_id=reference,
    )


@pytest.mark.django_db(transaction=True)
def test_uncommitted_event_is_invisible_to_another_connection(
    second_connection: BaseDatabaseWrapper,
) -> None:
    with transaction.atomic():
        message_id = place_order("A-1")
        assert count_seen_by(second_connection, message_id) == 0
        # ...while the writer itself sees it.
        assert OutboxEvent.objects.filter(message_id=message_id).count() == 1
    assert count_seen_by(second_connection, message_id) == 1


@pytest.mark.django_db(transaction=True)
def test_rollback_leaves_neither_order_nor_event(second_connection: BaseDatabaseWrapper) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        message_id = place_order("A-2")
        raise RuntimeError("payment declined")
    assert count_seen_by(second_connection, message_id) == 0
    assert not Order.objects.filter(reference="A-2").exists()
    assert not OutboxEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_commit_leaves_exactly_one_row_with_server_defaults() -> None:
    with transaction.atomic():
        message_id = place_order("A-3")
    event = OutboxEvent.objects.get()
    assert event.message_id == message_id
    assert uuid.UUID(message_id).version == 4
    assert (event.topic, event.aggregate_type, event.aggregate_id) == (
        "order.created", "order", "A-3")
    assert event.partition_key is None
    assert event.payload_data == {"reference": "A-3", "total": "12.50"}
    assert event.headers_data == {}
    assert event.status == Status.PENDING and event.attempts == 0
    assert event.claimed_at is None and event.processed_at is None
    # created_at comes from the database clock, in UTC.
    now = dt.datetime.now(dt.UTC)
    assert abs((event.created_at - now).total_seconds()) < 60


@pytest.mark.django_db(transaction=True)
def test_on_commit_effects_fire_once_and_never_on_rollback() -> None:
    received: list[dict[str, object]] = []

    def listener(**kwargs: object) -> None:
        received.append(kwargs)

    events_committed.connect(listener)
    try:
        with pytest.raises(RuntimeError), transaction.atomic():
            publish_event("t", {}, aggregate_type="a", aggregate_id="1")
            raise RuntimeError
        assert received == []

        with transaction.atomic():
            message_id = publish_event("t", {}, aggregate_type="a", aggregate_id="1")
            assert received == []  # not before the commit
        assert len(received) == 1
        assert received[0]["message_ids"] == [message_id]
        assert received[0]["topics"] == ["t"]
        assert received[0]["using"] == "default"
    finally:
        events_committed.disconnect(listener)


@pytest.mark.django_db
def test_after_effects_are_registered_on_commit(django_capture_on_commit_callbacks) -> None:  # type: ignore[no-untyped-def]
    received: list[object] = []

    def listener(**kwargs: object) -> None:
        received.append(kwargs["message_ids"])

    events_committed.connect(listener)
    try:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            publish_event("t", {}, aggregate_type="a", aggregate_id="1")
            publish_events([NewEvent("t", {}, "a", "2"), NewEvent("t", {}, "a", "3")])
        assert len(callbacks) == 2  # one per call, not per event
        assert received == []
        for callback in callbacks:
            callback()
        assert [len(ids) for ids in received] == [1, 2]  # type: ignore[arg-type]
    finally:
        events_committed.disconnect(listener)


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_raises_and_writes_nothing() -> None:
    with pytest.raises(NotInTransaction, match=r"transaction\.atomic\(using='default'\)"):
        publish_event("t", {"a": 1}, aggregate_type="a", aggregate_id="1")
    assert not OutboxEvent.objects.exists()


@pytest.mark.django_db
def test_payload_encoding_handles_django_types() -> None:
    when = dt.datetime(2026, 11, 21, 12, 30, tzinfo=dt.UTC)
    key = uuid.UUID("12345678-1234-5678-1234-567812345678")
    message_id = publish_event(
        "t",
        {"price": Decimal("9.99"), "at": when, "day": dt.date(2026, 1, 2), "id": key,
         "text": "grüße ✓"},
        aggregate_type="order", aggregate_id=42, headers={"x-tenant": "acme"},
        partition_key="customer-7", message_id="my-id-1",
    )
    assert message_id == "my-id-1"
    event = OutboxEvent.objects.get(message_id="my-id-1")
    assert event.payload_data == {
        "price": "9.99", "at": "2026-11-21T12:30:00Z", "day": "2026-01-02",
        "id": "12345678-1234-5678-1234-567812345678", "text": "grüße ✓",
    }
    assert event.aggregate_id == "42"
    assert event.headers_data == {"x-tenant": "acme"}
    assert event.partition_key == "customer-7"


@pytest.mark.django_db
@babelfish_gap("describe-parameters-long-statement",
               "the driver's sp_describe_undeclared_parameters fails past 4,000 characters "
               "and rolls the transaction back")
def test_publish_events_writes_all_in_order_and_large_batches_split() -> None:
    ids = publish_events([
        NewEvent("t", {"n": n}, "agg", str(n % 7)) for n in range(1200)
    ] + [{"topic": "t", "payload": [1], "aggregate_type": "x", "aggregate_id": "y"}])
    assert len(ids) == 1201 and len(set(ids)) == 1201
    rows = list(OutboxEvent.objects.order_by("id").values_list("message_id", flat=True))
    assert rows == ids
    assert publish_events([]) == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"payload": {"x": float("nan")}}, r"^payload\.x: nan is not valid JSON"),
        ({"payload": {"items": [1, {"p": float("inf")}]}},
         r"^payload\.items\[1\]\.p: inf is not valid JSON"),
        ({"payload": {"when": object()}}, r"^payload\.when: a object is not JSON serializable"),
        ({"payload": {"s": {1, 2}}}, r"^payload\.s: a set is not JSON serializable"),
        ({"payload": {(1, 2): "x"}}, r"^payload: key \(1, 2\) \(tuple\) is not a valid JSON key"),
        ({"topic": ""}, r"^topic: must be a non-empty string"),
        ({"topic": "   "}, r"^topic: must be a non-empty string"),
        ({"topic": None}, r"^topic: must be a non-empty string, got None"),
        ({"topic": "t" * 256}, r"^topic: is longer than 255 characters \(256 given\)"),
        # 128 emoji are 256 UTF-16 code units: too long for NVARCHAR(255).
        ({"topic": "😀" * 128}, r"^topic: is longer than 255 characters"),
        ({"aggregate_type": ""}, r"^aggregate_type: must be a non-empty string"),
        ({"aggregate_id": "x" * 256}, r"^aggregate_id: is longer than 255"),
        ({"aggregate_id": 1.5}, r"^aggregate_id: must be a non-empty string, got 1\.5"),
        ({"aggregate_id": True}, r"^aggregate_id: must be a non-empty string, got True"),
        ({"partition_key": ""}, r"^partition_key: must be a non-empty string"),
        ({"message_id": "m" * 65}, r"^message_id: is longer than 64 characters"),
        ({"message_id": ""}, r"^message_id: must be a non-empty string"),
        ({"headers": ["a"]}, r"^headers: must be a dict with string keys or None"),
        ({"headers": {1: "a"}}, r"^headers: must be a dict with string keys or None"),
        ({"headers": {"a": float("nan")}}, r"^headers\.a: nan is not valid JSON"),
        # Django's encoder writes a Decimal as its str(): "Infinity", "NaN".
        ({"payload": {"total": Decimal("Infinity")}},
         r"^payload\.total: Decimal\('Infinity'\) is not valid JSON \(NaN and Infinity"),
        ({"payload": [Decimal("-Infinity")]}, r"^payload\[0\]: Decimal\('-Infinity'\) is not"),
        ({"payload": {"p": Decimal("NaN")}}, r"^payload\.p: Decimal\('NaN'\) is not valid JSON"),
        ({"payload": {"p": Decimal("sNaN")}}, r"^payload\.p: Decimal\('sNaN'\) is not valid"),
        ({"headers": {"h": Decimal("NaN")}}, r"^headers\.h: Decimal\('NaN'\) is not valid"),
        # NUL characters: PostgreSQL cannot store one in text or jsonb, so none may.
        ({"topic": "order\x00created"}, r"^topic: contains a NUL character \(U\+0000\) at index 5"),
        ({"aggregate_type": "\x00"}, r"^aggregate_type: contains a NUL character"),
        ({"aggregate_id": "a\x00"}, r"^aggregate_id: contains a NUL character \(U\+0000\) at index 1"),
        ({"partition_key": "p\x00"}, r"^partition_key: contains a NUL character"),
        ({"message_id": "m\x00"}, r"^message_id: contains a NUL character"),
        ({"payload": {"items": [{"name": "a\x00b"}]}},
         r"^payload\.items\[0\]\.name: contains a NUL character \(U\+0000\) at index 1"),
        ({"payload": {"k\x00": 1}}, r"^payload: key 'k\\x00' contains a NUL character"),
        ({"payload": "\x00"}, r"^payload: contains a NUL character"),
        ({"headers": {"x-note": "\x00"}}, r"^headers\.x-note: contains a NUL character"),
        # Lone surrogates: valid in a Python str, not in UTF-8 text.
        ({"topic": "t\ud800"}, r"^topic: contains a lone surrogate \(U\+D800\) at index 1"),
        ({"aggregate_id": "\udfff"}, r"^aggregate_id: contains a lone surrogate \(U\+DFFF\)"),
        ({"message_id": "m\udc80"}, r"^message_id: contains a lone surrogate"),
        ({"payload": {"name": "é\ud83d"}},
         r"^payload\.name: contains a lone surrogate \(U\+D83D\) at index 1"),
        ({"payload": {"\ud800": 1}}, r"^payload: key '\\ud800' contains a lone surrogate"),
        ({"headers": {"h": ["ok", "\udc00"]}}, r"^headers\.h\[1\]: contains a lone surrogate"),
        # JSON text where a value was meant: it would reach consumers as a string.
        ({"payload": '{"a": 1}'}, r"^payload: is a str holding a JSON object"),
        ({"payload": " [1, 2]\n"}, r"^payload: is a str holding a JSON array"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(
    kwargs: dict[str, object], message: str
) -> None:
    arguments: dict[str, object] = {
        "topic": "t", "payload": {}, "aggregate_type": "a", "aggregate_id": "1", **kwargs
    }
    topic, payload = arguments.pop("topic"), arguments.pop("payload")
    with pytest.raises(InvalidEvent, match=message):
        publish_event(topic, payload, **arguments)  # type: ignore[arg-type]
    assert not OutboxEvent.objects.exists()


@pytest.mark.django_db
def test_oversized_payload_is_refused_with_its_size() -> None:
    with override_settings(EVENTFERRY={"MAX_PAYLOAD_BYTES": 100}):
        publish_event("t", {"s": "x" * 80}, aggregate_type="a", aggregate_id="1")
        with pytest.raises(InvalidEvent, match=r"^payload: 108 bytes as JSON, over "
                           r"EVENTFERRY\['MAX_PAYLOAD_BYTES'\] \(100\)"):
            publish_event("t", {"s": "x" * 100}, aggregate_type="a", aggregate_id="2")
        # Bytes, not characters: 40 two-byte characters are 80 bytes.
        with pytest.raises(InvalidEvent, match=r"^payload: 1\d\d bytes"):
            publish_event("t", {"s": "é" * 50}, aggregate_type="a", aggregate_id="3")
    assert OutboxEvent.objects.count() == 1


@pytest.mark.django_db
def test_one_bad_event_in_a_batch_writes_none() -> None:
    with pytest.raises(InvalidEvent, match=r"^events\[1\]\.topic: must be a non-empty string"):
        publish_events([NewEvent("t", {}, "a", "1"), NewEvent("", {}, "a", "2")])
    with pytest.raises(InvalidEvent, match=r"^message_id 'dup' is given to more than one"):
        publish_events([NewEvent("t", {}, "a", "1", message_id="dup"),
                        NewEvent("t", {}, "a", "2", message_id="dup")])
    with pytest.raises(InvalidEvent, match=r"^events\[0\]: .*unexpected keyword argument 'colour'"):
        publish_events([{"topic": "t", "payload": {}, "aggregate_type": "a",
                         "aggregate_id": "1", "colour": "red"}, NewEvent("t", {}, "a", "2")])
    with pytest.raises(InvalidEvent, match=r"^event: expected a NewEvent or a mapping, got int"):
        publish_events([7])  # type: ignore[list-item]
    assert not OutboxEvent.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_duplicate_message_id_is_invalid_and_the_transaction_stays_usable() -> None:
    with transaction.atomic():
        publish_event("t", {}, aggregate_type="a", aggregate_id="1", message_id="same")
    with transaction.atomic():
        Order.objects.create(reference="D-1", total=Decimal("1.00"))
        with pytest.raises(InvalidEvent, match=r"^message_id 'same' is already in the outbox"):
            publish_event("t", {}, aggregate_type="a", aggregate_id="2", message_id="same")
        # Only the INSERT was undone: the order stands and more can be written.
        publish_event("t", {}, aggregate_type="a", aggregate_id="3", message_id="other")
        with pytest.raises(InvalidEvent, match=r"^events\[1\]\.message_id 'same' is already"):
            publish_events([NewEvent("t", {}, "a", "4", message_id="new"),
                            NewEvent("t", {}, "a", "5", message_id="same")])
    assert Order.objects.filter(reference="D-1").exists()
    assert sorted(OutboxEvent.objects.values_list("message_id", flat=True)) == ["other", "same"]


@pytest.mark.django_db
def test_json_text_payload_is_refused_and_raw_json_is_stored_as_given() -> None:
    # A str that merely looks like JSON, or holds a JSON string or number, is a string.
    # SQL Server stores no scalar payload at all (see the test below).
    if connections["default"].vendor != "microsoft":
        for text in ("hello", "{not json", '"quoted"', "42"):
            message_id = publish_event("t", text, aggregate_type="a", aggregate_id=text)
            assert OutboxEvent.objects.get(message_id=message_id).payload_data == text
    message_id = publish_event("t", RawJSON('{"a": [1, 2.5, null]}'), aggregate_type="a",
                               aggregate_id="raw")
    event = OutboxEvent.objects.get(message_id=message_id)
    assert event.payload_data == {"a": [1, 2.5, None]}
    assert event.payload == '{"a": [1, 2.5, null]}'  # the caller's text, not re-encoded


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{bad", r"^payload: RawJSON is not valid JSON text \(Expecting property name"),
        ('{"a": NaN}', r"^payload: RawJSON is not valid JSON text \(NaN is not valid JSON"),
        ("[Infinity]", r"^payload: RawJSON is not valid JSON text \(Infinity is not valid"),
        ('{"a": "\\u0000"}', r"^payload\.a: contains a NUL character"),
        ('["\\ud800"]', r"^payload\[0\]: contains a lone surrogate"),
        ("", r"^payload: RawJSON is not valid JSON text"),
    ],
)
def test_bad_raw_json_names_the_problem(text: str, message: str) -> None:
    with pytest.raises(InvalidEvent, match=message):
        publish_event("t", RawJSON(text), aggregate_type="a", aggregate_id="1")
    assert not OutboxEvent.objects.exists()


def test_raw_json_wants_text() -> None:
    with pytest.raises(TypeError, match=r"RawJSON takes JSON text \(a str\), not bytes"):
        RawJSON(b"{}")  # type: ignore[arg-type]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("column", ["payload", "headers"])
def test_database_rejects_malformed_json(column: str) -> None:
    """The second line of defence, for rows written around publish_event()."""
    table = dialect_for(connections["default"].vendor, get_settings().table_name).table
    values = {"payload": "{}", "headers": "{}", column: "{not json"}
    with pytest.raises(DatabaseError), transaction.atomic(), connections["default"].cursor() as c:
        c.execute(
            f"INSERT INTO {table} (message_id, topic, aggregate_type, aggregate_id, payload, "
            "headers) VALUES (%s, %s, %s, %s, %s, %s)",
            ["m", "t", "a", "1", values["payload"], values["headers"]],
        )
    assert not OutboxEvent.objects.exists()


@pytest.mark.django_db
def test_queryset_names_the_states() -> None:
    publish_events([NewEvent("t", {}, "a", str(n)) for n in range(5)])
    # Status 1 (claimed) is 0.1.0's, refused since migration 0003.
    states = [Status.PENDING, Status.PENDING, Status.DONE, Status.FAILED, Status.DEAD]
    for event, status in zip(OutboxEvent.objects.order_by("id"), states, strict=True):
        event.status = status
        event.save(update_fields=["status"])
    [in_flight] = OutboxStore().claim(1)
    assert OutboxEvent.objects.pending().count() == 2
    assert list(OutboxEvent.objects.in_flight().values_list("id", flat=True)) == [in_flight.id]
    assert OutboxEvent.objects.done().count() == 1
    assert OutboxEvent.objects.failed().count() == 1
    assert OutboxEvent.objects.dead().count() == 1
    assert OutboxEvent.objects.open().count() == 3
    assert OutboxEvent.objects.for_aggregate("a", "4").get().status == Status.DEAD


def test_only_sql_servers_isjson_check_refuses_scalar_documents() -> None:
    name = get_settings().table_name
    assert dialect_for("microsoft", name).features.json_documents_only
    assert not dialect_for("microsoft", name, native_json=True).features.json_documents_only
    assert not any(dialect_for(vendor, name).features.json_documents_only
                   for vendor in ("postgresql", "mysql", "sqlite"))


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif("connections['default'].vendor != 'microsoft'")
@pytest.mark.parametrize("payload", ["hello", 42, 2.5, True, None, RawJSON(' "quoted"')])
def test_sql_server_refuses_a_scalar_payload_before_writing_anything(payload: Any) -> None:
    # CHECK (ISJSON(payload) = 1) is true only for an object or an array (SQL Server 2016+
    # without ISJSON's type argument): the INSERT would fail inside the caller's
    # transaction, so the scalar is refused first, with the whole call unwritten.
    with pytest.raises(InvalidEvent, match=r"^events\[1\]\.payload: SQL Server's ISJSON "
                       r"check stores only a JSON object or array"), transaction.atomic():
        publish_events([
            NewEvent("t", {"ok": 1}, "a", "1"),
            NewEvent("t", payload, "a", "2"),
        ])
    assert not OutboxEvent.objects.exists()
