"""How a relay runs: its settings, its name, and the publisher it is built with."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any

from django.utils.module_loading import import_string

from ..conf import DEFAULTS, EventferrySettings, get_settings
from ..publishers.base import Publisher
from ..publishers.task_routing import route_tasks

#: Seconds between the progress lines a working relay logs at INFO.
PROGRESS_INTERVAL = 60.0


def default_relay_id() -> str:
    """``host:pid``: what a relay is called in logs unless it is given a name."""
    return f"{socket.gethostname()}:{os.getpid()}"


def build_publisher(settings: EventferrySettings | None = None) -> Publisher:
    """The publisher named in ``EVENTFERRY["PUBLISHER"]``, built with its OPTIONS; behind
    a :class:`~eventferry_django.publishers.task_routing.TaskRouting` that sends Django
    task rows to their Celery app when ``TASKS`` has an ``OutboxTaskBackend``."""
    config = (settings or get_settings()).publisher
    publisher_class = import_string(config.backend)
    return route_tasks(publisher_class(**config.options))


@dataclass
class RelayConfig:
    """One relay's run: the ``EVENTFERRY`` values it uses (their defaults are the
    registry's, :data:`~eventferry_django.conf.DEFAULTS`) and its command's options."""

    batch_size: int
    poll_interval: float = 1.0
    claim_timeout: float = float(DEFAULTS["CLAIM_TIMEOUT"])
    max_attempts: int = DEFAULTS["MAX_ATTEMPTS"]
    batches_in_flight: int = DEFAULTS["BATCHES_IN_FLIGHT"]
    relay_id: str = field(default_factory=default_relay_id)
    once: bool = False
    until_empty: bool = False
    max_events: int | None = None
    #: First pause after a database or broker failure; it doubles up to 30 s.
    error_backoff: float = 0.5
    #: Seconds between progress lines at INFO, logged while the relay has work.
    progress_interval: float = PROGRESS_INTERVAL

    @property
    def mode(self) -> str:
        """When :meth:`Relay.run` returns, in words."""
        mode = ("after one pass" if self.once else "when nothing is claimable"
                if self.until_empty else "when stopped")
        if self.max_events is not None:
            mode += f" or after {self.max_events:,} events"
        return mode

    @classmethod
    def from_settings(cls, settings: EventferrySettings | None = None, **overrides: Any
                      ) -> RelayConfig:
        """Defaults from ``EVENTFERRY``; keyword arguments override them."""
        settings = settings or get_settings()
        values: dict[str, Any] = {
            "batch_size": settings.batch_size,
            "batches_in_flight": settings.batches_in_flight,
            "claim_timeout": settings.claim_timeout,
            "max_attempts": settings.max_attempts,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
