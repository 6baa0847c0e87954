"""Publishers for relays started as real processes in the crash tests.

They stand in for a broker where the test is about the relay's own behaviour when the
process dies; each leaves a trace on disk the test can read, since the process is gone.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eventferry_django.publishers.base import OutboundMessage, Publisher, PublishResult


class FilePublisher(Publisher):
    """Appends each message as a JSON line to ``path``; with ``stall_topic``, writes the
    batch first and then hangs (the test kills it mid-batch); with ``kill_topic``,
    SIGKILLs its own process when a message of that topic arrives; with ``hold_until``, a
    path, returns only once that file exists, so a test decides when the publish ends."""

    def __init__(self, *, path: str, stall_topic: str | None = None,
                 kill_topic: str | None = None, delay: float = 0.0,
                 hold_until: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.path = Path(path)
        self.stall_topic = stall_topic
        self.kill_topic = kill_topic
        self.delay = delay
        self.hold_until = Path(hold_until) if hold_until else None

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        if self.kill_topic and any(m.topic == self.kill_topic for m in messages):
            os.kill(os.getpid(), signal.SIGKILL)
        with self.path.open("a", encoding="utf-8") as out:
            for m in messages:
                out.write(json.dumps({"pid": os.getpid(), "id": m.id, "message_id": m.message_id,
                                      "aggregate_id": m.aggregate_id, "attempts": m.attempts,
                                      "payload": m.payload, "at": time.time()}) + "\n")
        if self.stall_topic and any(m.topic == self.stall_topic for m in messages):
            time.sleep(3600)
        time.sleep(self.delay)
        while self.hold_until and not self.hold_until.exists():
            time.sleep(0.02)
        return [PublishResult.ok() for _ in messages]
