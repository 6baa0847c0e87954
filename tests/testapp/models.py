from django.db import models


class Order(models.Model):
    """A business row written in the same transaction as its event."""

    reference = models.CharField(max_length=64, unique=True)
    total = models.DecimalField(max_digits=10, decimal_places=2)
