"""Where a message goes, as an option: a ``str.format`` template over the row's fields,
or a callable of the message. Validated once here for every publisher that routes by
such a key (kombu's ``routing_key``, NATS's ``subject``, Kafka's ``topic``), so they
refuse the same mistakes in the same words.
"""

from __future__ import annotations

import string
from collections.abc import Callable

from django.utils.module_loading import import_string

from ..exceptions import ConfigurationError
from .base import OutboundMessage

#: Fields a template may use.
TEMPLATE_FIELDS = frozenset({"topic", "aggregate_type", "aggregate_id", "partition_key"})

#: A function of the message giving its routing key, subject or topic.
KeyFunction = Callable[[OutboundMessage], str]


def format_fields(template: str) -> list[str | None]:
    """Field names of a ``str.format`` template (None for a positional ``{}``)."""
    return [
        field_name or None
        for _, field_name, _, _ in string.Formatter().parse(template)
        if field_name is not None
    ]


def is_template(value: object) -> bool:
    return isinstance(value, str) and ("{" in value or "}" in value)


def template_problem(template: str) -> str | None:
    """Why the format string ``template`` cannot be filled from a message, or None when
    it can."""
    try:
        fields = format_fields(template)
    except ValueError as exc:
        return f"is not a valid format string ({exc})"
    unknown = [f for f in fields if f not in TEMPLATE_FIELDS]
    if unknown:
        return (
            f"uses {', '.join(repr(f) if f else '{}' for f in unknown)}; a format string "
            f"may use only {', '.join('{' + f + '}' for f in sorted(TEMPLATE_FIELDS))}"
        )
    return None


def key_problem(value: object) -> str | None:
    """Why ``value`` cannot be a template-or-callable option, or None when it can (None
    itself can: the publisher's default)."""
    if value is None or (callable(value) and not isinstance(value, str)):
        return None
    if not isinstance(value, str):
        return "must be a format string or the dotted path of a callable"
    if is_template(value):
        return template_problem(value)
    # Without braces it names a callable; a constant key would silently hide a typo.
    try:
        target = import_string(value)
    except ImportError as exc:
        return (
            "has no {placeholders}, so it must be the dotted path of a callable "
            f"(OutboundMessage) -> str, but it cannot be imported: {exc}"
        )
    if not callable(target):
        return "names something that is not callable"
    return None


def fields_of(message: OutboundMessage) -> dict[str, str]:
    """The values a template's fields take for ``message``."""
    return {
        "topic": message.topic,
        "aggregate_type": message.aggregate_type,
        "aggregate_id": message.aggregate_id,
        "partition_key": message.effective_partition_key,
    }


def key_function(value: object, default: str = "{topic}") -> KeyFunction:
    """Turn an option :func:`key_problem` accepted into a function of the message."""
    if value is None:
        value = default
    if is_template(value):
        template = str(value)

        def from_template(message: OutboundMessage) -> str:
            return template.format_map(fields_of(message))

        return from_template
    target = import_string(value) if isinstance(value, str) else value
    if not callable(target):
        raise ConfigurationError(f"{value!r} is neither a format string nor a callable.")
    function: KeyFunction = target
    return function
