"""Encoding payloads and headers to JSON text, with errors that name the bad field."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from .exceptions import InvalidEvent

_encoder = DjangoJSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def encode_json(value: Any, field: str) -> str:
    """Compact JSON text for ``value``; Decimal, datetime, date, time, timedelta and UUID
    are handled as Django does. NaN, Infinity and unknown types raise :class:`InvalidEvent`
    naming the path of the offending value (``payload.items[2].price``)."""
    try:
        return _encoder.encode(value)
    except (TypeError, ValueError) as exc:
        path, reason = _find_unencodable(value, field)
        raise InvalidEvent(f"{path}: {reason}") from exc


def _find_unencodable(value: Any, path: str) -> tuple[str, str]:
    """Walk ``value`` down to the first part the encoder refuses. Only runs on failure."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, f"{value!r} is not valid JSON (NaN and Infinity are rejected)."
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
