"""The relay's publishing thread: order, errors, stopping."""

from __future__ import annotations

import threading
import time

import pytest

from eventferry_django.relay.sender import Sender


def test_calls_run_in_order_on_one_other_thread() -> None:
    sender = Sender("test-send")
    seen: list[tuple[int, str]] = []

    def call(n: int) -> int:
        time.sleep(0.01 if n == 0 else 0)  # a slow first call does not let others pass
        seen.append((n, threading.current_thread().name))
        return n * 10

    futures = [sender.submit(lambda n=n: call(n)) for n in range(5)]
    assert [f.result(5) for f in futures] == [0, 10, 20, 30, 40]
    assert seen == [(n, "test-send") for n in range(5)]
    assert sender.close(5)


def test_an_error_reaches_whoever_waits_and_the_thread_goes_on() -> None:
    sender = Sender()

    def fail() -> None:
        raise ConnectionError("broker gone")

    failed = sender.submit(fail)
    after = sender.submit(lambda: "still working")
    with pytest.raises(ConnectionError, match="broker gone"):
        failed.result(5)
    assert after.result(5) == "still working"
    assert sender.close(5)


def test_close_finishes_what_is_queued_and_gives_up_on_a_stuck_call() -> None:
    sender = Sender()
    assert sender.close()  # never started
    queued = sender.submit(lambda: "done")
    assert sender.close(5) and queued.result(0) == "done"

    release = threading.Event()
    stuck = Sender()
    stuck.submit(release.wait)
    started = time.monotonic()
    assert not stuck.close(0.2)  # a broker that does not answer does not hold us
    assert time.monotonic() - started < 2
    release.set()
