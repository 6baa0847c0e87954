"""The shop's side (``Order``) and, in the same app for the demo's sake, the consuming
side: what a downstream service (shipping, customer statistics) keeps. eventferry's
inbox table makes its handling idempotent. In a real system the consumer would be
another service with its own database."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    class Status(models.TextChoices):
        PLACED = "placed"
        PAID = "paid"

    reference = models.CharField(max_length=32, unique=True)
    customer = models.CharField(max_length=254)
    total = models.DecimalField(max_digits=10, decimal_places=2)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PLACED)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("id",)

    def __str__(self) -> str:
        return f"{self.reference} ({self.status})"

    def as_event(self) -> dict[str, object]:
        """The payload of this order's events."""
        return {"order_id": self.pk, "reference": self.reference,
                "customer": self.customer, "total": self.total}

    def as_json(self) -> dict[str, object]:
        return {**self.as_event(), "total": str(self.total), "status": self.status,
                "created_at": self.created_at.isoformat()}


# -- the consumer's tables ----------------------------------------------------------------

class CustomerTally(models.Model):
    """Orders and spend per customer: a counter, so handling a message twice would show."""

    customer = models.CharField(max_length=254, unique=True)
    orders = models.PositiveIntegerField(default=0)
    spent = models.DecimalField(max_digits=12, decimal_places=2, default=0)

    def __str__(self) -> str:
        return f"{self.customer}: {self.orders} orders, {self.spent} spent"


class Shipment(models.Model):
    """Created when an order is paid. The order is known only through the event."""

    order_id = models.BigIntegerField()
    order_reference = models.CharField(max_length=32)
    customer = models.CharField(max_length=254)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"shipment for {self.order_reference}"
