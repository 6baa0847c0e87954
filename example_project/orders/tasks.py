"""The shop's background work as Django tasks, run by the shop's Celery workers through
eventferry's ``OutboxTaskBackend`` (see ``TASKS`` in ``shop/settings.py``).

``send_receipt.enqueue(order.pk)`` in the payment view writes the task into the outbox in
the view's transaction: a payment that rolls back sends no receipt, and one that commits
sends it even if the web process dies a moment later. ``celery -A shop worker`` runs it
(the relay hands it over with the order events). Email is outside the database, so a
receipt is sent at least once: a worker killed after sending and before committing would
send it again.
"""

from __future__ import annotations

from django.core import mail
from eventferry_django.task_api import task

from .models import Order


@task()
def send_receipt(order_id: int) -> str:
    """Email the customer the receipt of a paid order; return the address it went to."""
    order = Order.objects.get(pk=order_id)
    mail.send_mail(
        subject=f"Your receipt for {order.reference}",
        message=f"Thank you! We received {order.total} for order {order.reference}.",
        from_email="shop@example.com",
        recipient_list=[order.customer],
    )
    return order.customer
