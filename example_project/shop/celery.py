"""The shop's Celery app.

``celery -A shop worker`` runs the shop's Django tasks (the receipt email, delivered by
the outbox relay as ``eventferry.run_django_task`` messages on ``shop.tasks``) and
consumes the order events that the outbox relay publishes:
``orders.consumers.OrderEventsConsumerStep`` is a worker bootstep that reads the
``shop.orders`` queue on the worker's own broker connection. ``celery -A shop beat`` may
drive the relay too (``eventferry.relay``, see ``CELERY_BEAT_SCHEDULE``), in place of a
long-running ``manage.py outbox_relay``.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")

app = Celery("shop")
app.config_from_object("django.conf:settings", namespace="CELERY")
# Finds eventferry_django.tasks (eventferry.relay, eventferry.purge, and
# eventferry.run_django_task, which runs the Django tasks such as orders.tasks.send_receipt).
app.autodiscover_tasks()
# Named by path, so the consumer (and with it the models) loads when the worker starts,
# after Django is set up.
app.steps["consumer"].add("orders.consumers:OrderEventsConsumerStep")
