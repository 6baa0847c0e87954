"""W3C trace context capture; a no-op unless OpenTelemetry is installed."""

from __future__ import annotations

try:
    import opentelemetry.propagate as propagate
except ImportError:  # OpenTelemetry is an optional extra.
    propagate = None  # type: ignore[assignment]


def current_traceparent() -> str | None:
    """The ``traceparent`` of the active span, or None without one (or without OTel)."""
    if propagate is None:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")
