from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import CheckMessage, Error, register


class ProbeConfig(AppConfig):
    name = "probe_app"

    def ready(self) -> None:
        register(extra_in_use)
        if settings.EXTRA == "prometheus":
            # As the README tells a project to, for the backlog gauges.
            from eventferry_django.metrics import register_backlog_collector

            register_backlog_collector()


def extra_in_use(**kwargs: Any) -> list[CheckMessage]:
    """The extras that no publisher or database needs: eventferry must find their library."""
    if settings.EXTRA == "prometheus":
        from eventferry_django import metrics

        if not metrics.available():
            return [Error("eventferry_django.metrics finds no prometheus_client", id="probe.E001")]
    if settings.EXTRA == "opentelemetry":
        from eventferry_django import tracing

        if tracing.propagate is None:
            return [Error("eventferry_django.tracing finds no OpenTelemetry", id="probe.E002")]
    return []
