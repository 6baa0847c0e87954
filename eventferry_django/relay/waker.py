"""Waking an idle relay early when new events commit.

Polling is always underneath; a wake-up only cuts the idle sleep short. Two sources:
``publish_event()`` committing in the same process (the ``events_committed`` signal),
and, on PostgreSQL, a LISTEN connection that hears the NOTIFY each publish queues in
its transaction (PostgreSQL delivers it on commit and drops it on rollback).

A NOTIFY's payload names the buckets of the rows written, comma-separated, and wakes the
relay only if it holds one of them (``concerns``): the others would claim for nothing.
An empty payload (a row without a bucket, a publisher of 0.1.0) wakes every relay.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection
from typing import Any

from django.db import connections

from ..signals import events_committed

# The name documented for logging configuration (docs/operating.md), kept when the module
# moved into the relay package.
logger = logging.getLogger("eventferry_django.waker")


class Waker:
    """An event the relay sleeps on; set by commits in this process or by NOTIFY."""

    def __init__(self, using: str, channel: str,
                 concerns: Callable[[Collection[int]], bool] = lambda buckets: True) -> None:
        self.using = using
        self.channel = channel
        #: Whether a commit of rows in these buckets is this relay's to claim.
        self.concerns = concerns
        self._event = threading.Event()
        self._stop = threading.Event()
        self._listener: threading.Thread | None = None
        #: How many wake-ups arrived: the relay compares it to notice new commits.
        self.wakeups = 0

    def wake(self) -> None:
        self.wakeups += 1
        self._event.set()

    def sleep(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True if woken early. Clears the wake-up."""
        woken = self._event.wait(seconds)
        self._event.clear()
        return woken

    def wakes_for(self, payload: str) -> bool:
        """Whether a NOTIFY with ``payload`` (see the module's docstring) wakes the relay."""
        try:
            buckets = {int(bucket) for bucket in payload.split(",")} if payload else None
        except ValueError:
            return True
        return buckets is None or self.concerns(buckets)

    def _on_commit(self, *, using: str, **kwargs: Any) -> None:
        if using == self.using:
            self.wake()

    def start(self) -> None:
        events_committed.connect(self._on_commit, dispatch_uid=f"eventferry-waker-{id(self)}")
        if connections[self.using].vendor == "postgresql":
            self._listener = threading.Thread(
                target=self._listen, name="eventferry-listen", daemon=True
            )
            self._listener.start()

    def stop(self) -> None:
        events_committed.disconnect(dispatch_uid=f"eventferry-waker-{id(self)}")
        self._stop.set()
        self.wake()
        if self._listener is not None:
            self._listener.join(timeout=5)

    def _listen(self) -> None:
        """LISTEN on a connection of its own; reconnect after failures, quietly."""
        delay = 0.5
        while not self._stop.is_set():
            wrapper = connections.create_connection(self.using)
            try:
                wrapper.ensure_connection()
                raw = wrapper.connection
                if not hasattr(raw, "notifies"):  # psycopg2: polling only
                    return
                raw.execute(f'LISTEN "{self.channel}"')
                delay = 0.5
                while not self._stop.is_set():
                    for notify in raw.notifies(timeout=0.5, stop_after=1):
                        if self.wakes_for(notify.payload):
                            self.wake()
            except Exception as exc:
                logger.info("LISTEN %s interrupted (%s); polling until it is back",
                            self.channel, exc)
                self._stop.wait(delay)
                delay = min(delay * 2, 30.0)
            finally:
                wrapper.close()
