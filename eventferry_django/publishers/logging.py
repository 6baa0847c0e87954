"""A publisher that writes each message to a logger instead of a broker."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.checks import CheckMessage

from .base import OutboundMessage, Publisher, PublishResult


class LoggingPublisher(Publisher):
    """Logs every message at INFO on the logger named by OPTIONS ``logger``
    (default ``eventferry_django.published``). Useful in development and as the default, so a
    new install relays something visible before a broker is configured. Messages are
    logged in the order given, so the log keeps each aggregate's id order."""

    def __init__(self, *, logger: str = "eventferry_django.published", **options: Any) -> None:
        super().__init__(logger=logger, **options)
        self.logger = logging.getLogger(logger)

    @classmethod
    def check(cls, options: Mapping[str, Any]) -> list[CheckMessage]:
        return cls.unknown_options(options, ["logger"], "eventferry.E022")

    def describe(self) -> str:
        return f"LoggingPublisher (logger {self.logger.name!r})"

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        for message in messages:
            self.logger.info(
                "%s %s %s/%s %s", message.topic, message.message_id,
                message.aggregate_type, message.aggregate_id, message.payload,
            )
        return [PublishResult.ok() for _ in messages]
