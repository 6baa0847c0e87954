"""A publisher that keeps messages in a list: for your own tests and for demos."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import ClassVar

from .base import OutboundMessage, Publisher, PublishResult


class InMemoryPublisher(Publisher):
    """Appends every message to :attr:`sent`, shared by all instances in the process, in
    the order given (so :attr:`sent` keeps each aggregate's id order).

    In a test::

        InMemoryPublisher.reset()
        ... run the relay ...
        assert [m.topic for m in InMemoryPublisher.sent] == ["order.created"]
    """

    sent: ClassVar[list[OutboundMessage]] = []
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def reset(cls) -> None:
        with cls._lock:
            cls.sent.clear()

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        with self._lock:
            self.sent.extend(messages)
        return [PublishResult.ok() for _ in messages]
