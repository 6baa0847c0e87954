"""EVENTFERRY validation: each mistake becomes a system-check Error with a hint."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection
from django.test import override_settings

from eventferry_django.checks import check_settings
from eventferry_django.conf import DEFAULTS, get_settings
from eventferry_django.exceptions import ConfigurationError
from eventferry_django.naming import TableName
from eventferry_django.store import dialect_for


def errors_for(setting: Any) -> list[tuple[str, str, str | None]]:
    with override_settings(EVENTFERRY=setting):
        return [(m.id or "", m.msg, m.hint) for m in check_settings()]


def test_defaults_are_valid_and_documented() -> None:
    assert errors_for({}) == []
    with override_settings(EVENTFERRY={}):
        settings = get_settings()
    assert (settings.table, settings.schema, settings.database) == ("outbox", None, "default")
    assert (settings.claim_timeout, settings.batch_size, settings.max_attempts) == (60, 500, 5)
    assert settings.native_json is False
    assert settings.max_payload_bytes == DEFAULTS["MAX_PAYLOAD_BYTES"] == 1024 * 1024
    assert settings.publisher.backend == "eventferry_django.publishers.logging.LoggingPublisher"


@pytest.mark.parametrize(
    ("setting", "check_id", "message"),
    [
        ([], "eventferry.E001", "EVENTFERRY must be a dict, not list"),
        ({"BATCHSIZE": 5}, "eventferry.E002", "EVENTFERRY['BATCHSIZE'] is not a known setting"),
        ({"TABLE": "out box"}, "eventferry.E003", "EVENTFERRY['TABLE'] is 'out box', which is not a valid SQL identifier"),
        ({"TABLE": "x" * 101}, "eventferry.E003", "EVENTFERRY['TABLE'] is 'xxx"),
        ({"SCHEMA": "dbo];DROP TABLE x;--"}, "eventferry.E003", "EVENTFERRY['SCHEMA'] is 'dbo];DROP"),
        ({"CLAIM_TIMEOUT": 86_401}, "eventferry.E004", "EVENTFERRY['CLAIM_TIMEOUT'] is 86401; it must be a number of seconds above 0 and at most 86400 (24 hours)"),
        ({"CLAIM_TIMEOUT": 0}, "eventferry.E004", "EVENTFERRY['CLAIM_TIMEOUT'] is 0"),
        ({"CLAIM_TIMEOUT": "60"}, "eventferry.E004", "EVENTFERRY['CLAIM_TIMEOUT'] is '60'"),
        ({"BATCH_SIZE": 0}, "eventferry.E005", "EVENTFERRY['BATCH_SIZE'] is 0; it must be a whole number 1..10,000"),
        ({"BATCH_SIZE": 10_001}, "eventferry.E005", "EVENTFERRY['BATCH_SIZE'] is 10001"),
        ({"BATCHES_IN_FLIGHT": 0}, "eventferry.E015", "EVENTFERRY['BATCHES_IN_FLIGHT'] is 0; it must be a whole number 1..8"),
        ({"BATCHES_IN_FLIGHT": 2.0}, "eventferry.E015", "EVENTFERRY['BATCHES_IN_FLIGHT'] is 2.0"),
        ({"MAX_CHAIN": 0}, "eventferry.E016", "EVENTFERRY['MAX_CHAIN'] is 0; it must be a whole number 1..10,000"),
        ({"MAX_CHAIN": 10_001}, "eventferry.E016", "EVENTFERRY['MAX_CHAIN'] is 10001"),
        ({"MAX_ATTEMPTS": True}, "eventferry.E006", "EVENTFERRY['MAX_ATTEMPTS'] is True"),
        ({"BACKOFF": {"BASE": -1}}, "eventferry.E007", "EVENTFERRY['BACKOFF'] BASE is -1"),
        ({"BACKOFF": {"BASE": 10, "MAX": 5}}, "eventferry.E007", "EVENTFERRY['BACKOFF'] MAX is 5; it must be seconds, at least BASE"),
        ({"BACKOFF": {"JITTER": 2}}, "eventferry.E007", "EVENTFERRY['BACKOFF'] JITTER is 2"),
        ({"BACKOFF": {"FACTOR": 2}}, "eventferry.E007", "EVENTFERRY['BACKOFF'] has unknown keys ['FACTOR']"),
        ({"MAX_PAYLOAD_BYTES": -1}, "eventferry.E008", "EVENTFERRY['MAX_PAYLOAD_BYTES'] is -1"),
        ({"PUBLISHER": "kombu"}, "eventferry.E009", "EVENTFERRY['PUBLISHER'] is 'kombu'; it must be a dict with a dotted-path 'BACKEND'"),
        ({"PUBLISHER": {"BACKEND": "eventferry_django.publishers.memory.InMemoryPublisher", "OPTIONS": []}}, "eventferry.E009", "EVENTFERRY['PUBLISHER'] OPTIONS is []"),
        ({"DATABASE": "replica"}, "eventferry.E010", "EVENTFERRY['DATABASE'] is 'replica', which is not in DATABASES"),
        ({"NATIVE_JSON": "yes"}, "eventferry.E011", "EVENTFERRY['NATIVE_JSON'] is 'yes'; it must be True or False"),
        ({"PUBLISHER": {"BACKEND": "no.such.Publisher"}}, "eventferry.E020", "EVENTFERRY['PUBLISHER']['BACKEND'] 'no.such.Publisher' cannot be imported"),
        ({"PUBLISHER": {"BACKEND": "collections.OrderedDict"}}, "eventferry.E021", "EVENTFERRY['PUBLISHER']['BACKEND'] 'collections.OrderedDict' is not a subclass of eventferry_django.publishers.base.Publisher"),
        ({"PUBLISHER": {"BACKEND": "eventferry_django.publishers.logging.LoggingPublisher", "OPTIONS": {"level": 1}}}, "eventferry.E022", "LoggingPublisher got unknown OPTIONS ['level']"),
    ],
)
def test_each_mistake_is_an_error_with_a_hint(setting: Any, check_id: str, message: str) -> None:
    errors = errors_for(setting)
    assert [e[0] for e in errors] == [check_id], errors
    _, text, hint = errors[0]
    assert text.startswith(message)
    assert hint


def test_claim_timeout_hint_explains_the_ceiling() -> None:
    [(_, _, hint)] = errors_for({"CLAIM_TIMEOUT": 90_000})
    assert hint is not None and "32-bit millisecond" in hint


def test_get_settings_raises_a_configuration_error_naming_every_problem() -> None:
    with override_settings(EVENTFERRY={"TABLE": "a-b", "BATCH_SIZE": 0}), pytest.raises(
        ConfigurationError
    ) as raised:
        get_settings()
    assert isinstance(raised.value, ImproperlyConfigured)
    assert "EVENTFERRY['TABLE'] is 'a-b'" in str(raised.value)
    assert "EVENTFERRY['BATCH_SIZE'] is 0" in str(raised.value)


def test_settings_are_reread_after_a_change() -> None:
    with override_settings(EVENTFERRY={"BATCH_SIZE": 7}):
        assert get_settings().batch_size == 7
    with override_settings(EVENTFERRY={"BATCH_SIZE": 9}):
        assert get_settings().batch_size == 9


def test_manage_py_check_fails_on_a_bad_setting() -> None:
    with override_settings(EVENTFERRY={"CLAIM_TIMEOUT": 10**6}), pytest.raises(
        SystemCheckError, match=r"eventferry\.E004"
    ):
        call_command("check")


def test_names_too_long_for_the_vendor_are_refused() -> None:
    # PostgreSQL truncates identifiers past 63 characters, which would make two index
    # names collide silently.
    name = TableName("t" * 50)
    outbox = dialect_for("postgresql", name).schema.outbox
    assert {name.claim_index, name.closed_index} <= set(outbox.too_long_for("postgresql"))
    assert name.aggregate_index not in outbox.too_long_for("postgresql")
    assert dialect_for("microsoft", name).schema.outbox.too_long_for("microsoft") == []
    assert dialect_for("sqlite", name).schema.outbox.too_long_for("sqlite") == []
    errors = errors_for({"TABLE": "t" * 50})
    if connection.vendor in {"postgresql", "mysql"}:
        assert [e[0] for e in errors] == ["eventferry.E013"]
        assert "Choose a shorter table name" in (errors[0][2] or "")
    else:
        assert errors == []


def test_the_names_of_the_tables_beside_the_outbox_count_too() -> None:
    # A 30-character TABLE fits the outbox's own names on PostgreSQL, but the task
    # results' index beside it, named after it, is 65 characters long: past PostgreSQL's 63
    # and MariaDB/MySQL's 64.
    name = TableName("t" * 30)
    schema = dialect_for("postgresql", name).schema
    assert schema.outbox.too_long_for("postgresql") == []
    assert f"IX_{'t' * 30}_task_results_status_finished_at" in (
        schema.task_results.too_long_for("postgresql"))
    errors = errors_for({"TABLE": "t" * 30})
    if connection.vendor in {"postgresql", "mysql"}:
        [(check_id, message, _)] = errors
        assert check_id == "eventferry.E013"
        assert message.startswith(f"EVENTFERRY['TABLE'] '{'t' * 30}' is too long")
        assert f"IX_{'t' * 30}_task_results_status_finished_at" in message
    else:
        assert errors == []


def test_a_table_name_too_long_to_name_its_neighbours_is_refused_not_raised() -> None:
    # 90 characters are a valid TABLE, but "<TABLE>_task_results" is past the 100 a
    # name may have: the check says so rather than fail with the error.
    errors = errors_for({"TABLE": "t" * 90})
    assert "eventferry.E013" in [e[0] for e in errors]
    message = next(m for check_id, m, _ in errors if "tables named after it" in m)
    assert "Task results table name" in message


def test_inbox_names_are_checked_like_the_outbox() -> None:
    inbox = dialect_for("postgresql", TableName("outbox")).schema.inbox(TableName("i" * 50))
    assert inbox.too_long_for("postgresql") == [
        f"UQ_{'i' * 50}_consumer_message_id", f"DF_{'i' * 50}_handled_at",
        f"IX_{'i' * 50}_handled_at"]
    errors = errors_for({"INBOX_TABLE": "i" * 50})
    if connection.vendor in {"postgresql", "mysql"}:
        assert [e[0] for e in errors] == ["eventferry.E013"]
        assert errors[0][1].startswith("EVENTFERRY['INBOX_TABLE'] 'iii")
    else:
        assert errors == []
    [(check_id, message, hint)] = errors_for({"INBOX_TABLE": "in box"})
    assert check_id == "eventferry.E003" and "EVENTFERRY['INBOX_TABLE'] is 'in box'" in message
    [(check_id, message, hint)] = errors_for({"TABLE": "events", "INBOX_TABLE": "events"})
    assert check_id == "eventferry.E050" and "cannot share a table" in message
    assert hint and "INBOX_TABLE" in hint
    with pytest.raises(ConfigurationError, match="Inbox table name 'a;b' is not a valid"):
        TableName("a;b", role="Inbox")


def test_schema_on_sqlite_is_refused() -> None:
    errors = errors_for({"SCHEMA": "audit"})
    if connection.vendor == "sqlite":
        assert [e[0] for e in errors] == ["eventferry.E014"]
    else:
        assert errors == []


def test_identifier_validation_guards_every_name() -> None:
    with pytest.raises(ConfigurationError, match="Outbox table name 'a;b' is not a valid identifier"):
        TableName("a;b")
    with pytest.raises(ConfigurationError, match="Outbox schema name '' is not a valid"):
        TableName("outbox", "")
    assert TableName("x" * 100).table == "x" * 100


def test_outbox_sql_rejects_a_bad_identifier_argument() -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="Outbox table name 'a b' is not a valid identifier"):
        call_command("outbox_sql", vendor="microsoft", table="a b")
