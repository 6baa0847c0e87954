"""The keys of ``EVENTFERRY`` that shape what a message says: its wire format
(``MESSAGE_FORMAT``, ``CLOUDEVENTS_SOURCE``) and each topic's payload schema
(``TOPICS``). Parsed here for :func:`eventferry_django.conf.parse`, which reports what
is wrong through ``fail(key, message, hint)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: ``"plain"``: the payload as the body and eventferry's headers (the first release's
#: format); the CloudEvents 1.0 formats put the same facts into CloudEvents attributes.
MESSAGE_FORMATS = ("plain", "cloudevents-binary", "cloudevents-structured")

#: Keys of one topic's entry in ``TOPICS``.
TOPIC_KEYS = ("SCHEMA_VERSION", "JSON_SCHEMA")

Fail = Callable[[str, str, str], None]

_TOPICS_HINT = (
    "TOPICS maps a topic to {'SCHEMA_VERSION': 'a version string', 'JSON_SCHEMA': "
    "{a JSON Schema dict}}; both keys are optional."
)


@dataclass(frozen=True)
class TopicConfig:
    """One topic's payload schema: the version its events carry unless
    ``publish_event(schema_version=...)`` says otherwise, and the JSON Schema its payloads
    must match (checked at publish time)."""

    schema_version: str | None = None
    json_schema: Mapping[str, Any] | None = None


def parse_message_format(raw_format: Any, raw_source: Any, fail: Fail) -> tuple[str, str | None]:
    """``MESSAGE_FORMAT`` and ``CLOUDEVENTS_SOURCE``, checked together: the CloudEvents
    formats need a source."""
    message_format = raw_format
    if message_format not in MESSAGE_FORMATS:
        fail("MESSAGE_FORMAT", f"is {message_format!r}; it must be one of "
             f"{', '.join(map(repr, MESSAGE_FORMATS))}.",
             "'plain' is eventferry's own format; the others are CloudEvents 1.0's binary and "
             "structured modes.")
        message_format = MESSAGE_FORMATS[0]
    source = raw_source
    if source is not None and (not isinstance(source, str) or not source.strip()
                               or any(c.isspace() for c in source)):
        fail("CLOUDEVENTS_SOURCE", f"is {source!r}; it must be a URI reference without "
             "spaces, or None.", "For example 'https://shop.example.com/orders' or "
             "'/shop/orders': CloudEvents' source attribute.")
        source = None
    if source is None and message_format != "plain":
        fail("CLOUDEVENTS_SOURCE", f"is not set, and MESSAGE_FORMAT {message_format!r} "
             "needs it: every CloudEvent names its source.",
             "Set it to a URI reference naming this service, e.g. "
             "'https://shop.example.com/orders'.")
    return message_format, source


def parse_topics(raw: Any, fail: Fail) -> dict[str, TopicConfig]:
    """``TOPICS``: each topic's schema version and JSON Schema, the schema itself checked
    against its metaschema (which needs the ``jsonschema`` extra)."""
    if not isinstance(raw, Mapping) or not all(isinstance(t, str) and t for t in raw):
        fail("TOPICS", f"is {raw!r}; it must be a dict keyed by topic.", _TOPICS_HINT)
        return {}
    topics = {}
    for topic, entry in raw.items():
        where = f"[{topic!r}]"
        if not isinstance(entry, Mapping) or set(entry) - set(TOPIC_KEYS):
            fail("TOPICS", f"{where} is {entry!r}; it must be a dict with keys among "
                 f"{', '.join(TOPIC_KEYS)}.", _TOPICS_HINT)
            continue
        version = entry.get("SCHEMA_VERSION")
        if version is not None and (not isinstance(version, str) or not version.strip()
                                    or len(version) > 255):
            fail("TOPICS", f"{where}['SCHEMA_VERSION'] is {version!r}; it must be a "
                 "non-empty string of at most 255 characters.", _TOPICS_HINT)
            version = None
        schema = entry.get("JSON_SCHEMA")
        if schema is not None and not _valid_json_schema(schema, f"{where}['JSON_SCHEMA']",
                                                         fail):
            schema = None
        topics[topic] = TopicConfig(version, schema)
    return topics


def _valid_json_schema(schema: Any, where: str, fail: Fail) -> bool:
    if not isinstance(schema, Mapping):
        fail("TOPICS", f"{where} is {schema!r}; it must be a JSON Schema as a dict.",
             _TOPICS_HINT)
        return False
    try:
        from jsonschema.exceptions import SchemaError
        from jsonschema.validators import validator_for
    except ImportError:
        fail("TOPICS", f"{where} needs the jsonschema package, which is not installed.",
             'pip install "eventferry-django[jsonschema]"')
        return False
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        fail("TOPICS", f"{where} is not a valid JSON Schema: {exc.message}.", _TOPICS_HINT)
        return False
    return True
