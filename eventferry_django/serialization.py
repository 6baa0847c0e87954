"""Encoding payloads and headers to JSON text, with errors that name the bad field."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, NoReturn

from django.core.serializers.json import DjangoJSONEncoder
from django.utils.functional import Promise

from .exceptions import InvalidEvent


class RawJSON:
    """A payload that is JSON text already, stored as given instead of being encoded as
    a JSON string: ``publish_event("t", RawJSON(text), ...)``.

    The text is checked as any payload is (valid JSON without NaN or Infinity, no NUL
    characters or lone surrogates, within ``MAX_PAYLOAD_BYTES``) but not re-encoded.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"RawJSON takes JSON text (a str), not {type(text).__name__}.")
        self.text = text

    def __repr__(self) -> str:
        return f"RawJSON({self.text!r})"


class _Encoder(DjangoJSONEncoder):
    def default(self, o: Any) -> Any:
        # Django writes a Decimal as its str(), which for these is "NaN" or "Infinity":
        # valid JSON strings that no consumer expects in place of a number.
        if isinstance(o, Decimal) and not o.is_finite():
            raise ValueError(f"{o!r} is not valid JSON")
        return super().default(o)


_encoder = _Encoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
_SURROGATE = re.compile("[\ud800-\udfff]")
_NAN_OR_INFINITY = "(NaN and Infinity are rejected)"


def encode_payload(value: Any, field: str) -> str:
    """The payload as JSON text: :func:`encode_json`, except that :class:`RawJSON` is
    checked and kept as it is, and a str holding a JSON object or array is refused (it
    would reach consumers as a string)."""
    if isinstance(value, RawJSON):
        return _checked_raw_json(value.text, field)
    if isinstance(value, str) and (kind := _json_document(value)):
        preview = value if len(value) <= 40 else value[:37] + "..."
        raise InvalidEvent(
            f"{field}: is a str holding a JSON {kind} ({preview!r}); it would be encoded "
            "again and reach consumers as one JSON string. Pass the decoded value "
            "(json.loads(text)), or RawJSON(text) to store the text as it is."
        )
    return encode_json(value, field)


def encode_json(value: Any, field: str) -> str:
    """Compact JSON text for ``value``; Decimal, datetime, date, time, timedelta and UUID
    are handled as Django does. NaN, Infinity, unknown types, NUL characters and lone
    surrogates raise :class:`InvalidEvent` naming the path of the offending value
    (``payload.items[2].price``)."""
    try:
        text = _encoder.encode(value)
    except (TypeError, ValueError) as exc:
        path, reason = _find_unencodable(value, field)
        raise InvalidEvent(f"{path}: {reason}") from exc
    # The encoder writes NUL as an escape and leaves surrogates as they are; both are
    # rare, so the walk to name the culprit only runs when the text shows a trace.
    if "\\u0000" in text or (not text.isascii() and _SURROGATE.search(text)):
        _refuse_unstorable(value, field)
    return text


def unstorable_text(text: str) -> str | None:
    """Why ``text`` cannot be stored in the outbox, or None: PostgreSQL cannot hold a NUL
    in text or jsonb, and a lone surrogate has no UTF-8 encoding."""
    nul = text.find("\x00")
    if nul >= 0:
        return (f"contains a NUL character (U+0000) at index {nul}, which the outbox does "
                "not store (PostgreSQL cannot).")
    if not text.isascii() and (surrogate := _SURROGATE.search(text)):
        return (f"contains a lone surrogate (U+{ord(surrogate.group()):04X}) at index "
                f"{surrogate.start()}, which is not valid Unicode text and has no UTF-8 "
                "encoding.")
    return None


def _json_document(text: str) -> str | None:
    """"object" or "array" when ``text`` is JSON text of one, else None."""
    if text.lstrip()[:1] not in ("{", "["):
        return None
    try:
        decoded = json.loads(text)
    except ValueError:
        return None
    return "object" if isinstance(decoded, dict) else "array"


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON {_NAN_OR_INFINITY}")


def _checked_raw_json(text: str, field: str) -> str:
    try:
        decoded = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise InvalidEvent(f"{field}: RawJSON is not valid JSON text ({exc}).") from None
    # NUL and surrogates can only arrive escaped (\u0000, \ud800) or as non-ASCII text.
    if "\\u" in text or not text.isascii():
        _refuse_unstorable(decoded, field)
    return text


def _refuse_unstorable(value: Any, field: str) -> None:
    found = _find_unstorable(value, field)
    if found is not None:
        path, reason = found
        raise InvalidEvent(f"{path}: {reason}")


def _find_unstorable(value: Any, path: str) -> tuple[str, str] | None:
    """The first string (key or value) holding a NUL or a lone surrogate."""
    if isinstance(value, str | Promise):
        reason = unstorable_text(str(value))
        return (path, reason) if reason else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and (reason := unstorable_text(key)):
                return path, f"key {key!r} {reason}"
            if (found := _find_unstorable(item, f"{path}.{key}")) is not None:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if (found := _find_unstorable(item, f"{path}[{index}]")) is not None:
                return found
    return None


def _find_unencodable(value: Any, path: str) -> tuple[str, str]:
    """Walk ``value`` down to the first part the encoder refuses. Only runs on failure."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, f"{value!r} is not valid JSON {_NAN_OR_INFINITY}."
    if isinstance(value, Decimal) and not value.is_finite():
        return path, f"{value!r} is not valid JSON {_NAN_OR_INFINITY}."
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key is not None and not isinstance(key, str | int | float | bool):
                return path, f"key {key!r} ({type(key).__name__}) is not a valid JSON key."
            if not _encodes(item):
                return _find_unencodable(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if not _encodes(item):
                return _find_unencodable(item, f"{path}[{index}]")
    else:
        return path, f"a {type(value).__name__} is not JSON serializable."
    return path, "cannot be encoded as JSON."


def _encodes(value: Any) -> bool:
    try:
        _encoder.encode(value)
    except (TypeError, ValueError):
        return False
    return True
