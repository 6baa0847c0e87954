from django.db import models


class Order(models.Model):
    """A business row written in the same transaction as its event."""

    reference = models.CharField(max_length=64, unique=True)
    total = models.DecimalField(max_digits=10, decimal_places=2)


class Shipment(models.Model):
    """A consumer's side effect: nothing here is unique, so a message handled twice
    would leave two rows."""

    order_reference = models.CharField(max_length=64)
    handled_by = models.CharField(max_length=64, default="")
