"""The shop's JSON API. ``ATOMIC_REQUESTS`` runs each view in one transaction, so an
order and the event announcing it commit together or not at all; the outbox relay
publishes the event after the commit. Paying also enqueues the receipt email as a Django
task, in the same transaction.

    POST /orders/               {"customer": "ada@example.com", "total": "12.50",
                                 "reference": "SO-1001"}  (reference optional)
    POST /orders/<id>/pay/
    GET  /orders/
"""

from __future__ import annotations

import json
import secrets
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import IntegrityError, transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST
from eventferry_django import publish_event

from .models import Order
from .tasks import send_receipt


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@csrf_exempt  # a demo API for scripts; a real one authenticates its callers
@require_http_methods(["GET", "POST"])
def orders(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        return JsonResponse({"orders": [o.as_json() for o in Order.objects.all()]})
    try:
        data: Any = json.loads(request.body or b"{}")
        customer = str(data["customer"]).strip()
        total = Decimal(str(data["total"]))
        reference = str(data.get("reference") or f"SO-{secrets.token_hex(4).upper()}")
    except (ValueError, TypeError, KeyError, InvalidOperation):
        return _error(400, 'expected JSON {"customer": ..., "total": "12.50"}')
    if not customer or not total.is_finite() or total <= 0:
        return _error(400, "customer must be given and total must be positive")
    try:
        with transaction.atomic():  # a savepoint: the request's transaction stays usable
            order = Order.objects.create(reference=reference, customer=customer, total=total)
    except IntegrityError:
        return _error(409, f"order {reference} exists already")
    publish_event("order.created", order.as_event(),
                  aggregate_type="order", aggregate_id=order.pk)
    return JsonResponse(order.as_json(), status=201)


@csrf_exempt
@require_POST
def pay(request: HttpRequest, order_id: int) -> JsonResponse:
    # A conditional UPDATE, not read-then-save: two concurrent payments cannot both pass,
    # and the transaction writes first (on SQLite, a write lock taken up front).
    paid = Order.objects.filter(pk=order_id, status=Order.Status.PLACED).update(
        status=Order.Status.PAID)
    if not paid:
        if Order.objects.filter(pk=order_id).exists():
            return _error(409, f"order {order_id} is not awaiting payment")
        return _error(404, f"no order {order_id}")
    order = Order.objects.get(pk=order_id)
    publish_event("order.paid", order.as_event(), aggregate_type="order", aggregate_id=order.pk)
    # A Django task in the same transaction: the receipt goes if and only if the payment
    # commits (OutboxTaskBackend; the shop's Celery workers run it).
    send_receipt.enqueue(order.pk)
    return JsonResponse(order.as_json())
