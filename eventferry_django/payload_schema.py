"""A topic's payload schema at publish time: the version an event carries and the JSON
Schema its payload must match (``EVENTFERRY["TOPICS"]``)."""

from __future__ import annotations

import json

from .exceptions import InvalidEvent
from .message_settings import TopicConfig


def schema_version(given: str | None, topic: TopicConfig | None) -> str | None:
    """The version to store: the one given to ``publish_event``, else the topic's."""
    if given is not None:
        return given
    return topic.schema_version if topic is not None else None


def check_payload(payload_json: str, topic_name: str, topic: TopicConfig | None,
                  version: str | None, field: str) -> None:
    """Refuse a payload its topic's JSON Schema rejects, naming the JSON path of the most
    relevant error. The schema describes the topic's ``SCHEMA_VERSION``: an event that
    names another version (an old payload replayed, a producer not yet upgraded) is not
    held to it. The encoded text is what is checked, so a Decimal or a datetime is
    judged as the consumer will read it (a number, a string)."""
    if topic is None or topic.json_schema is None:
        return
    if topic.schema_version is not None and version != topic.schema_version:
        return
    from jsonschema.exceptions import best_match
    from jsonschema.validators import validator_for

    schema = topic.json_schema
    validator = validator_for(schema)(schema)
    error = best_match(validator.iter_errors(json.loads(payload_json)))
    if error is not None:
        raise InvalidEvent(
            f"{field} at {error.json_path}: {error.message} (the JSON Schema of topic "
            f"{topic_name!r}, EVENTFERRY['TOPICS']). Nothing of this call was written."
        )

