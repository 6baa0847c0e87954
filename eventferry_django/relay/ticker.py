"""A relay's background chores (lease renewal, checking in with the other relays): each
on a daemon thread with a database connection of its own, so a slow pass of the relay's
own thread never delays them."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connections


class Ticker:
    """Calls ``tick`` every ``interval`` seconds, or at once after :meth:`wake`, from a
    thread of its own, until :meth:`stop`; closes that thread's connection to ``alias``
    on the way out. ``tick`` handles its own errors."""

    def __init__(self, name: str, interval: float, tick: Callable[[], None], alias: str
                 ) -> None:
        self.name = name
        self.interval = interval
        self._tick = tick
        self._alias = alias
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float | None = None) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping = True
        self._wake.set()
        thread.join(timeout)

    def _work(self) -> None:
        try:
            while True:
                self._wake.wait(self.interval)
                self._wake.clear()
                if self._stopping:
                    return
                self._tick()
        finally:
            connections[self._alias].close()
