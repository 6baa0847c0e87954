"""A publisher for the poison benchmark: RabbitMQ, except that it refuses some messages.

``EVENTFERRY_BENCH_REFUSE`` (set by ``benchmarks/relay.py``) names the message ids it
answers RETRY for, every time, without sending them; the rest go through
:class:`~eventferry_django.publishers.kombu.KombuPublisher`. A refused message is thus
retried until ``MAX_ATTEMPTS`` buries it, as a message the broker keeps rejecting is.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from eventferry_django.publishers.base import (
    OutboundMessage,
    Outcome,
    Publisher,
    PublishResult,
)
from eventferry_django.publishers.kombu import KombuPublisher

REFUSED = PublishResult(Outcome.RETRY, "refused by the poison benchmark")


class RefusingPublisher(Publisher):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.inner = KombuPublisher(**options)
        self.refuse = set(filter(None, os.environ.get("EVENTFERRY_BENCH_REFUSE", "").split(",")))

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        sent = [m for m in messages if m.message_id not in self.refuse]
        answers = iter(self.inner.publish(sent) if sent else [])
        return [REFUSED if m.message_id in self.refuse else next(answers) for m in messages]

    def describe(self) -> str:
        return f"{self.inner.describe()}, refusing {len(self.refuse)} message id(s)"

    def close(self) -> None:
        self.inner.close()
