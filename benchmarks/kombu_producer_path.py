"""KombuPublisher as Redis had it before its pipeline, for ``benchmarks/relay.py``'s
before-and-after: every batch through kombu's Producer, two round trips a message
(:class:`~eventferry_django.publishers.kombu_producer.KombuProducerPublisher`, which
KombuPublisher still uses for fanout exchanges and other kombu transports)."""

from __future__ import annotations

from typing import Any

from eventferry_django.publishers.kombu import KombuPublisher
from eventferry_django.publishers.kombu_producer import KombuProducerPublisher


class KombuProducerPathPublisher(KombuPublisher):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.delegate = KombuProducerPublisher(self.settings)
