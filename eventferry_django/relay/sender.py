"""Publishing on a thread of its own, so the relay's thread can talk to the database
meanwhile.

The relay keeps two batches on the move: while this thread hands one to the broker and
waits for its confirms, the relay's thread settles the other and claims its successors.
Encoding messages is Python work, and the database and broker calls release the GIL
while they wait, so the three overlap instead of taking turns.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_Job = tuple[Callable[[], Any], "Future[Any]"]


class Sender:
    """Runs submitted calls one after another, in the order submitted, on a daemon
    thread started on first use.

    Not a ``ThreadPoolExecutor``: its threads are joined at interpreter exit, and a relay
    told to exit at once must not wait for a broker that does not answer (the batch it
    was publishing comes back when its lease expires).
    """

    def __init__(self, name: str = "eventferry-send") -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, call: Callable[[], Any]) -> Future[Any]:
        """Queue ``call``; the future holds what it returns or raises."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
            self._thread.start()
        done: Future[Any] = Future()
        self._jobs.put((call, done))
        return done

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            call, done = job
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(call())
            except BaseException as exc:  # handed to whoever waits for the result
                done.set_exception(exc)

    def close(self, timeout: float | None = None) -> bool:
        """Finish what is queued, then stop the thread, waiting at most ``timeout``
        seconds. Returns whether it stopped."""
        thread, self._thread = self._thread, None
        if thread is None:
            return True
        self._jobs.put(None)
        thread.join(timeout)
        return not thread.is_alive()
