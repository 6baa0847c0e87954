"""How long a failed event waits before its next attempt.

The n-th retry (n = attempts so far, from 1) waits::

    delay(n) = min(MAX, BASE * 2 ** (n - 1)) * (1 + uniform(-JITTER, +JITTER))

with BASE, MAX and JITTER from ``EVENTFERRY["BACKOFF"]`` (defaults 1 s, 300 s, 0.2).
Jitter spreads the retries of a burst of failures so they do not return in lockstep.
"""

from __future__ import annotations

import random

from ..conf import Backoff


def retry_delay(attempts: int, backoff: Backoff, rng: random.Random | None = None) -> float:
    """Seconds to wait after the ``attempts``-th failed attempt (``attempts`` >= 1)."""
    exponent = max(0, attempts - 1)
    # Cap the exponent first: 2 ** 1000 would overflow a float.
    delay = backoff.max if exponent > 62 else min(backoff.max, backoff.base * 2**exponent)
    spread = (rng or random).uniform(-backoff.jitter, backoff.jitter)
    return max(0.001, delay * (1 + spread))
