"""The ``EVENTFERRY`` setting: defaults, parsing and validation.

Nothing is read at import time. :func:`get_settings` parses ``settings.EVENTFERRY`` on
first use and caches the result until Django signals that the setting changed (as
``override_settings`` does in tests). Problems are collected, not raised one at a
time, so the system check framework can report all of them at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from .contract import MAX_BATCH
from .exceptions import ConfigurationError
from .history_settings import (
    ARCHIVE_FORMATS,
    SPARK_DEFAULTS,
    SparkConfig,
    parse_archive_format,
    parse_spark,
)
from .message_settings import MESSAGE_FORMATS, TopicConfig, parse_message_format, parse_topics
from .naming import IDENTIFIER_PATTERN, QUOTES, TableName

SETTING_NAME = "EVENTFERRY"

#: The lease is bound as a 32-bit millisecond count on SQL Server; 24 h fits with room.
MAX_CLAIM_TIMEOUT_SECONDS = 24 * 60 * 60
#: More batches in flight stop paying off once the broker and the database are both busy.
MAX_BATCHES_IN_FLIGHT = 8
#: A chain is published within one batch, so it can never be longer than a batch.
MAX_CHAIN = MAX_BATCH

DEFAULT_PUBLISHER = "eventferry_django.publishers.logging.LoggingPublisher"


@dataclass(frozen=True)
class Setting:
    """One key of ``EVENTFERRY``: the single place its default is spelled.

    :data:`SETTINGS` lists them all; :data:`DEFAULTS`, the dataclasses below, the system
    checks (``check_id``) and the documentation's settings page are derived from it, so
    they cannot disagree. ``meaning`` is Markdown, for that page.
    """

    key: str
    #: The accepted values, as a reader would write them.
    type: str
    default: Any
    meaning: str
    #: The check a value that cannot be parsed raises.
    check_id: str
    #: Checks that look at this key beyond parsing it (router, vendor, publisher...).
    other_check_ids: tuple[str, ...] = ()

    @property
    def check_ids(self) -> tuple[str, ...]:
        return (self.check_id, *self.other_check_ids)


#: Every key of ``EVENTFERRY``, in the order the documentation lists them.
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "TABLE", "str (SQL identifier)", "outbox",
        "The outbox's table name, matching `^[a-zA-Z_][a-zA-Z0-9_]{0,99}$` and short enough "
        "that the index and constraint names derived from it fit the vendor (PostgreSQL: "
        "63 characters). Changing it after `migrate` does not move the table.",
        "eventferry.E003", ("eventferry.E013", "eventferry.E050"),
    ),
    Setting(
        "INBOX_TABLE", "str (SQL identifier)", "inbox",
        "The consumers' inbox table (see [Consuming events](consuming.md)); same rules as "
        "`TABLE`, and not the same name.",
        "eventferry.E003", ("eventferry.E013", "eventferry.E050"),
    ),
    Setting(
        "SCHEMA", "str (SQL identifier) or None", None,
        "Schema of both tables. `None` means `dbo` on SQL Server and the connection's "
        "default elsewhere; SQLite has none. Honoured by the DDL and by every ORM query.",
        "eventferry.E003", ("eventferry.E014",),
    ),
    Setting(
        "NATIVE_JSON", "bool", False,
        "SQL Server 2025 / current Azure SQL: `json` columns instead of `NVARCHAR(MAX)` with "
        "`ISJSON` checks. Leave it False on other vendors.",
        "eventferry.E011",
    ),
    Setting(
        "DATABASE", "str (a key of DATABASES)", "default",
        "The alias the outbox and the inbox live on unless a call names another: the admin, "
        "the commands, the Celery tasks and the inbox use it; `publish_event(using=...)` "
        "can name another (see [Several databases](databases.md)).",
        "eventferry.E010", ("eventferry.E012", "eventferry.E051", "eventferry.E052"),
    ),
    Setting(
        "CLAIM_TIMEOUT", f"number of seconds, above 0, at most {MAX_CLAIM_TIMEOUT_SECONDS:,}",
        60,
        "How long a relay's bucket leases last: a relay that stopped (killed, paused, cut "
        "off from the database) keeps its buckets this long before another relay takes "
        "them, with its batches in flight, counting an attempt for each row (see "
        "[Bucket leases](relay.md#bucket-leases)). SQL Server binds it as a 32-bit "
        "millisecond count, hence the 24-hour ceiling.",
        "eventferry.E004",
    ),
    Setting(
        "BATCH_SIZE", f"int, 1..{MAX_BATCH:,}", 500,
        "Rows per claim; `outbox_relay --batch-size` overrides it. 500 pays a pass's "
        "database round trips and broker confirm wait over enough events to keep up with "
        "a hand-written drain (see [Sizing](relay.md#sizing)).",
        "eventferry.E005",
    ),
    Setting(
        "BATCHES_IN_FLIGHT", f"int, 1..{MAX_BATCHES_IN_FLIGHT}", 2,
        "Batches a relay keeps at the broker at once, so it settles one while the broker "
        "confirms another; `outbox_relay --batches-in-flight` overrides it.",
        "eventferry.E015",
    ),
    Setting(
        "MAX_CHAIN", f"int, 1..{MAX_CHAIN:,}", 500,
        "Rows of one aggregate a claim may hand out at once, in id order (1: the head only, "
        "one event per aggregate in flight). 500 is the default batch, so a hot aggregate "
        "fills a batch by itself; longer chains pay only with larger batches and widen "
        "what a crash republishes (see [Chains](relay.md#chains)).",
        "eventferry.E016",
    ),
    Setting(
        "MAX_ATTEMPTS", "int, at least 1", 5,
        "Publish attempts before an event goes dead.",
        "eventferry.E006",
    ),
    Setting(
        "BACKOFF", "dict: BASE (seconds > 0), MAX (seconds >= BASE), JITTER (0..1)",
        {"BASE": 1.0, "MAX": 300.0, "JITTER": 0.2},
        "The n-th retry waits `min(MAX, BASE * 2**(n-1))` seconds, varied by +/- JITTER "
        "of itself. Missing keys take their default.",
        "eventferry.E007",
    ),
    Setting(
        "MAX_PAYLOAD_BYTES", "int, at least 1", 1024 * 1024,
        "Largest payload, as UTF-8 JSON; a larger one is `InvalidEvent`.",
        "eventferry.E008",
    ),
    Setting(
        "PUBLISHER", "dict: BACKEND (dotted path), OPTIONS (dict)",
        {"BACKEND": DEFAULT_PUBLISHER, "OPTIONS": {}},
        "Where events go: a `Publisher` subclass and its keyword arguments (see "
        "[Publishers](publishing.md#publishers)). Each publisher checks its OPTIONS.",
        "eventferry.E009",
        ("eventferry.E020", "eventferry.E021", "eventferry.E022", "eventferry.E030",
         "eventferry.E031", "eventferry.E032", "eventferry.E033", "eventferry.E040",
         "eventferry.E041", "eventferry.E042", "eventferry.E043", "eventferry.E044",
         "eventferry.E070", "eventferry.E071", "eventferry.E072", "eventferry.E073",
         "eventferry.E074", "eventferry.E080", "eventferry.E081", "eventferry.E082",
         "eventferry.E083"),
    ),
    Setting(
        "MESSAGE_FORMAT", " or ".join(f'"{f}"' for f in MESSAGE_FORMATS), "plain",
        "What the relay sends: `\"plain\"`, the payload with eventferry's headers; or a "
        "CloudEvents 1.0 event in binary mode (attributes as headers, the payload as the "
        "body) or structured mode (one `application/cloudevents+json` document); see "
        "[CloudEvents](publishing.md#cloudevents).",
        "eventferry.E017",
    ),
    Setting(
        "CLOUDEVENTS_SOURCE", "str (URI reference) or None", None,
        "CloudEvents' `source` attribute, naming this service; required by the CloudEvents "
        "formats.",
        "eventferry.E018",
    ),
    Setting(
        "TOPICS", "dict: topic -> {SCHEMA_VERSION (str), JSON_SCHEMA (dict)}", {},
        "Per topic, the payload's schema version events carry unless `publish_event("
        "schema_version=...)` gives one, and a JSON Schema every payload must match at "
        "publish time (needs the `jsonschema` extra); see "
        "[Payload versions](publishing.md#payload-versions).",
        "eventferry.E019",
    ),
    Setting(
        "SPARK", "dict: MASTER (str), JARS (list of str or None), CONF (dict), "
        "SQLSERVER_DRIVER (\"mssql-jdbc\" or \"jtds\")",
        SPARK_DEFAULTS,
        "How `outbox_archive`, `outbox_replay` and `outbox_report` start Spark: the master "
        "URL (a command's `--master` wins), the JDBC driver jars (`None`: Debian's jar for "
        "the outbox's database), extra Spark settings (`\"spark.executor.memory\": "
        "\"4g\"`; not `spark.master` or `spark.jars`, which MASTER and JARS decide), and "
        "`\"jtds\"` to reach SQL Server through Debian's jTDS instead of Microsoft's "
        "driver (see [The Spark history pipeline](history.md)).",
        "eventferry.E060", ("eventferry.E061",),
    ),
    Setting(
        "ARCHIVE_FORMAT", "\"parquet\" or \"delta\"", ARCHIVE_FORMATS[0],
        "What `outbox_archive` writes when `--format` is not given: a directory of Parquet "
        "runs with manifests, or a Delta Lake table (see [The Spark history pipeline]"
        "(history.md#delta-lake-tables)).",
        "eventferry.E065",
    ),
)

#: Each key's default, derived from :data:`SETTINGS`.
DEFAULTS: dict[str, Any] = {setting.key: setting.default for setting in SETTINGS}

@dataclass(frozen=True)
class Backoff:
    """Retry delay parameters, in seconds; ``jitter`` is a fraction of the delay."""

    base: float = DEFAULTS["BACKOFF"]["BASE"]
    max: float = DEFAULTS["BACKOFF"]["MAX"]
    jitter: float = DEFAULTS["BACKOFF"]["JITTER"]


@dataclass(frozen=True)
class PublisherConfig:
    backend: str = DEFAULT_PUBLISHER
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EventferrySettings:
    """The parsed setting; each field's default and meaning is in :data:`SETTINGS`."""

    table: str = DEFAULTS["TABLE"]
    inbox_table: str = DEFAULTS["INBOX_TABLE"]
    schema: str | None = DEFAULTS["SCHEMA"]
    native_json: bool = DEFAULTS["NATIVE_JSON"]
    database: str = DEFAULTS["DATABASE"]
    claim_timeout: float = float(DEFAULTS["CLAIM_TIMEOUT"])
    batch_size: int = DEFAULTS["BATCH_SIZE"]
    batches_in_flight: int = DEFAULTS["BATCHES_IN_FLIGHT"]
    max_chain: int = DEFAULTS["MAX_CHAIN"]
    max_attempts: int = DEFAULTS["MAX_ATTEMPTS"]
    backoff: Backoff = field(default_factory=Backoff)
    max_payload_bytes: int = DEFAULTS["MAX_PAYLOAD_BYTES"]
    publisher: PublisherConfig = field(default_factory=PublisherConfig)
    message_format: str = DEFAULTS["MESSAGE_FORMAT"]
    cloudevents_source: str | None = DEFAULTS["CLOUDEVENTS_SOURCE"]
    topics: Mapping[str, TopicConfig] = field(default_factory=dict)
    spark: SparkConfig = field(default_factory=SparkConfig)
    archive_format: str = DEFAULTS["ARCHIVE_FORMAT"]

    @property
    def table_name(self) -> TableName:
        return TableName(self.table, self.schema)

    @property
    def inbox_table_name(self) -> TableName:
        return TableName(self.inbox_table, self.schema, role="Inbox")


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the setting, phrased for a system check."""

    key: str
    message: str
    hint: str


def _is_number(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class _Reader:
    """Reads keys out of the raw setting, recording a :class:`Problem` per bad value."""

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = raw
        self.problems: list[Problem] = []

    def fail(self, key: str, message: str, hint: str) -> None:
        self.problems.append(Problem(key, f"{SETTING_NAME}[{key!r}] {message}", hint))

    def get(self, key: str) -> Any:
        return self.raw.get(key, DEFAULTS[key])

    def identifier(self, key: str, *, optional: bool = False) -> str | None:
        value = self.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, str) or not IDENTIFIER_PATTERN.match(value):
            self.fail(
                key,
                f"is {value!r}, which is not a valid SQL identifier.",
                f"Use a name matching {IDENTIFIER_PATTERN.pattern}.",
            )
            return DEFAULTS[key]  # type: ignore[no-any-return]
        return value

    def positive_int(self, key: str, maximum: int | None = None) -> int:
        value = self.get(key)
        if not _is_positive_int(value) or (maximum is not None and value > maximum):
            limit = f"1..{maximum:,}" if maximum else "at least 1"
            self.fail(key, f"is {value!r}; it must be a whole number {limit}.", f"Use {limit}.")
            return DEFAULTS[key]  # type: ignore[no-any-return]
        return value  # type: ignore[no-any-return]


def parse(raw: object) -> tuple[EventferrySettings, list[Problem]]:
    """Parse the raw setting; invalid values fall back to defaults and become problems."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        problem = Problem(
            "", f"{SETTING_NAME} must be a dict, not {type(raw).__name__}.",
            f"Set {SETTING_NAME} = {{...}} with the keys of the settings reference.",
        )
        return EventferrySettings(), [problem]

    reader = _Reader(raw)
    for key in raw:
        if key not in DEFAULTS:
            reader.fail(
                key, "is not a known setting.",
                f"Known settings: {', '.join(sorted(DEFAULTS))}.",
            )

    native_json = reader.get("NATIVE_JSON")
    if not isinstance(native_json, bool):
        reader.fail("NATIVE_JSON", f"is {native_json!r}; it must be True or False.",
                    "True selects SQL Server 2025's json type; leave False elsewhere.")
        native_json = False

    database = reader.get("DATABASE")
    if not isinstance(database, str) or not database:
        reader.fail("DATABASE", f"is {database!r}; it must be a database alias.",
                    "Name a key of settings.DATABASES.")
        database = DEFAULTS["DATABASE"]

    claim_timeout = reader.get("CLAIM_TIMEOUT")
    if not _is_number(claim_timeout) or not 0 < claim_timeout <= MAX_CLAIM_TIMEOUT_SECONDS:
        reader.fail(
            "CLAIM_TIMEOUT",
            f"is {claim_timeout!r}; it must be a number of seconds above 0 and at most "
            f"{MAX_CLAIM_TIMEOUT_SECONDS} (24 hours).",
            "A stopped relay's buckets are taken over after this long; SQL Server binds it "
            "as a 32-bit millisecond count, so 24 hours is the ceiling.",
        )
        claim_timeout = DEFAULTS["CLAIM_TIMEOUT"]
    message_format, source = parse_message_format(
        reader.get("MESSAGE_FORMAT"), reader.get("CLOUDEVENTS_SOURCE"), reader.fail)

    settings = EventferrySettings(
        table=reader.identifier("TABLE") or DEFAULTS["TABLE"],
        inbox_table=reader.identifier("INBOX_TABLE") or DEFAULTS["INBOX_TABLE"],
        schema=reader.identifier("SCHEMA", optional=True),
        native_json=native_json,
        database=database,
        claim_timeout=float(claim_timeout),
        batch_size=reader.positive_int("BATCH_SIZE", MAX_BATCH),
        batches_in_flight=reader.positive_int("BATCHES_IN_FLIGHT", MAX_BATCHES_IN_FLIGHT),
        max_chain=reader.positive_int("MAX_CHAIN", MAX_CHAIN),
        max_attempts=reader.positive_int("MAX_ATTEMPTS"),
        backoff=_parse_backoff(reader),
        max_payload_bytes=reader.positive_int("MAX_PAYLOAD_BYTES"),
        publisher=_parse_publisher(reader),
        message_format=message_format,
        cloudevents_source=source,
        topics=parse_topics(reader.get("TOPICS"), reader.fail),
        spark=parse_spark(reader.get("SPARK"), reader.fail),
        archive_format=parse_archive_format(reader.get("ARCHIVE_FORMAT"), reader.fail),
    )
    return settings, reader.problems


_BACKOFF_HINT = (
    "BACKOFF is {'BASE': seconds > 0, 'MAX': seconds >= BASE, 'JITTER': fraction 0..1}; "
    "the n-th retry waits min(MAX, BASE * 2**(n-1)), varied by +/- JITTER."
)


def _parse_backoff(reader: _Reader) -> Backoff:
    raw = reader.get("BACKOFF")
    if not isinstance(raw, Mapping):
        reader.fail("BACKOFF", f"is {raw!r}; it must be a dict with BASE, MAX and JITTER.",
                    _BACKOFF_HINT)
        return Backoff()
    unknown = set(raw) - {"BASE", "MAX", "JITTER"}
    if unknown:
        reader.fail("BACKOFF", f"has unknown keys {sorted(unknown)}.",
                    _BACKOFF_HINT)
    defaults = Backoff()
    base = raw.get("BASE", defaults.base)
    maximum = raw.get("MAX", defaults.max)
    jitter = raw.get("JITTER", defaults.jitter)
    if not (_is_number(base) and base > 0):
        reader.fail("BACKOFF", f"BASE is {base!r}; it must be seconds above 0.", _BACKOFF_HINT)
        base = defaults.base
    if not (_is_number(maximum) and maximum >= base):
        reader.fail("BACKOFF", f"MAX is {maximum!r}; it must be seconds, at least BASE.",
                    _BACKOFF_HINT)
        maximum = max(defaults.max, base)
    if not (_is_number(jitter) and 0 <= jitter <= 1):
        reader.fail("BACKOFF", f"JITTER is {jitter!r}; it must be a fraction 0..1.",
                    _BACKOFF_HINT)
        jitter = defaults.jitter
    return Backoff(float(base), float(maximum), float(jitter))


def _parse_publisher(reader: _Reader) -> PublisherConfig:
    raw = reader.get("PUBLISHER")
    if not isinstance(raw, Mapping) or not isinstance(raw.get("BACKEND"), str):
        reader.fail(
            "PUBLISHER", f"is {raw!r}; it must be a dict with a dotted-path 'BACKEND'.",
            f"For example {{'BACKEND': '{DEFAULT_PUBLISHER}', 'OPTIONS': {{}}}}.",
        )
        return PublisherConfig()
    unknown = set(raw) - {"BACKEND", "OPTIONS"}
    if unknown:
        reader.fail("PUBLISHER", f"has unknown keys {sorted(unknown)}.",
                    "Known keys: BACKEND, OPTIONS.")
    options = raw.get("OPTIONS", {})
    if not isinstance(options, Mapping):
        reader.fail("PUBLISHER", f"OPTIONS is {options!r}; it must be a dict.",
                    "OPTIONS are passed to the publisher as keyword arguments.")
        options = {}
    return PublisherConfig(raw["BACKEND"], dict(options))


_cached: EventferrySettings | None = None


def get_settings() -> EventferrySettings:
    """The parsed setting; raises :class:`ConfigurationError` naming every problem."""
    global _cached
    if _cached is None:
        parsed, problems = parse(getattr(django_settings, SETTING_NAME, None))
        if problems:
            raise ConfigurationError(" ".join(p.message for p in problems))
        _cached = parsed
    return _cached


@receiver(setting_changed)
def _forget_cached_settings(*, setting: str, **kwargs: Any) -> None:
    global _cached
    if setting == SETTING_NAME:
        _cached = None


def orm_db_table(table: Literal["outbox", "inbox", "task_results"] = "outbox") -> str:
    """The ``db_table`` of the outbox (or inbox, or task results) model, qualified for
    the vendor of ``DATABASE``.

    Read once, when the model class is built. It is lenient on purpose: a broken setting
    must not stop Django from starting, or the system checks could never report it.
    """
    from django.db import connections
    from django.utils.connection import ConnectionDoesNotExist

    parsed, _ = parse(getattr(django_settings, SETTING_NAME, None))
    name = parsed.inbox_table_name if table == "inbox" else parsed.table_name
    if table == "task_results":
        name = name.task_results
    try:
        vendor = connections[parsed.database].vendor
    except ConnectionDoesNotExist:
        return name.table
    if vendor not in QUOTES:
        return name.table
    return name.orm_db_table(vendor)
