"""A publisher that stands in for a broker at a distance: each batch is confirmed after
one simulated round trip, and the relay process counts what it published.

``benchmarks/scale_out.py`` sets it in the relays' settings: with a real broker the
broker's own CPU would share the machine with the relays and the database, and the
figures would measure the broker as much as the claim. Options:

``rtt``
    seconds each publisher call waits before confirming its whole batch (one round trip
    per batch, as a pipelining publisher pays);
``counts``
    a directory where each relay process keeps a file named after its relay id, holding
    how many events it has published so far (rewritten after every batch).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eventferry_django.publishers.base import OutboundMessage, Publisher, PublishResult


class SimulatedBroker(Publisher):
    def __init__(self, *, rtt: float = 0.0, counts: str | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.rtt = rtt
        self.counts = Path(counts) if counts else None
        self.published = 0
        #: The relay id is not known to a publisher; the process id names the file until
        #: ``EVENTFERRY_BENCH_RELAY`` (set per relay by the benchmark) does.
        self.name = os.environ.get("EVENTFERRY_BENCH_RELAY", str(os.getpid()))

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        if self.rtt:
            time.sleep(self.rtt)
        self.published += len(messages)
        if self.counts is not None:
            path = self.counts / self.name
            path.with_suffix(".tmp").write_text(str(self.published))
            path.with_suffix(".tmp").replace(path)
        return [PublishResult.ok() for _ in messages]

    def describe(self) -> str:
        return f"a simulated broker ({self.rtt * 1000:g} ms a batch)"
