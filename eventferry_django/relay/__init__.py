"""The relay: claims rows from the outbox, publishes them, settles them.

- :mod:`.loop`: :class:`Relay`, the loop (claim, send, settle, sleep);
- :mod:`.claimer`: every claim, from the buckets the relay holds;
- :mod:`.planner`: how much each claim asks for, and which claimed rows go out;
- :mod:`.flight`: the batches handed to the publishing thread (:mod:`.sender`);
- :mod:`.settlement`: acks, retries (:mod:`.retry`), burials, hand-backs, their counts;
- :mod:`.ownership`: which buckets the relay works on, started and stopped with it;
- :mod:`.bucket_holder`: the relay's bucket leases, taken, renewed and released;
- :mod:`.membership`: which buckets are this relay's share (:mod:`.bucket_filler` gives
  rows written without one theirs);
- :mod:`.recent_settlements`: what to settle again after a database outage;
- :mod:`.waker`: PostgreSQL's NOTIFY, so an idle relay wakes when events commit;
- :mod:`.reporting`: the relay's logs and its totals;
- :mod:`.config`: :class:`RelayConfig` and the publisher from the settings.
"""

from __future__ import annotations

from .config import RelayConfig, build_publisher, default_relay_id
from .loop import Relay
from .reporting import PassResult, RelayStats, logger

__all__ = ["PassResult", "Relay", "RelayConfig", "RelayStats", "build_publisher",
           "default_relay_id", "logger"]
