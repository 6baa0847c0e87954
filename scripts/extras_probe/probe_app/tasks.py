"""A Celery app on Redis, for the CeleryPublisher probe."""

from __future__ import annotations

from celery import Celery
from django.conf import settings

app = Celery("probe", broker=settings.REDIS_URL)
