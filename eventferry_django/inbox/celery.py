"""A Celery task base whose tasks run once per message id. Import needs Celery.

``CeleryPublisher`` sends each event as a task whose id is the outbox message id, so the
task id is what deduplicates::

    from celery import shared_task
    from eventferry_django.inbox.celery import InboxTask

    @shared_task(base=InboxTask, name="shipping.on_order_paid", acks_late=True)
    def on_order_paid(event):
        Shipment.objects.create(order_id=event["order_id"])

The task body runs inside ``transaction.atomic(using=inbox_database)`` after the inbox
row is inserted; a task id handled before returns None without running the body. Two
options, as task attributes or decorator keywords: ``inbox_consumer`` (default: the task
name) and ``inbox_database`` (default: ``EVENTFERRY["DATABASE"]``).

An exception, or ``self.retry()``, rolls the inbox row back with the body's writes, so
the retry or redelivery handles the message again. With ``acks_late=True`` a worker that
dies mid-task leaves the message to be delivered again, and the inbox makes that safe.
"""

from __future__ import annotations

from typing import Any

from celery import Task

from ..exceptions import InvalidMessage
from . import DUPLICATE, run_once


class InboxTask(Task):  # type: ignore[misc]
    """Runs the task body at most once per task id for its consumer."""

    #: The inbox's consumer name; None means the task's name.
    inbox_consumer: str | None = None
    #: Database alias of the inbox, which the body's writes must use too; None means
    #: ``EVENTFERRY["DATABASE"]``.
    inbox_database: str | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The worker (and apply()) pushed this call's request, whose id is the message
        # id, before calling here. Task.__call__ would push a fresh request without an
        # id, so the body is called through run() directly, seeing the worker's request.
        message_id = self.request.id
        if not message_id:
            raise InvalidMessage(
                f"{self.name} was called without a task id, so the inbox cannot tell "
                "whether it ran before: send it (delay(), apply_async(), apply()), or call "
                ".run() to bypass the inbox."
            )
        result = run_once(
            self.inbox_consumer or self.name, message_id,
            lambda: self.run(*args, **kwargs), using=self.inbox_database,
        )
        return None if result is DUPLICATE else result
