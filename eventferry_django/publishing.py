"""Renamed to :mod:`eventferry_django.enqueue` (writing events into the outbox, as
opposed to the publishers that send them to a broker); this name stays for one release
so existing imports keep working. ``from eventferry_django import publish_event`` is the
documented spelling."""

from __future__ import annotations

import warnings

from .enqueue import NewEvent, publish_event, publish_events

warnings.warn("eventferry_django.publishing is now eventferry_django.enqueue",
              DeprecationWarning, stacklevel=2)

__all__ = ["NewEvent", "publish_event", "publish_events"]
