from django.db import models


class PlainEvent(models.Model):
    """A row shaped like an outbox event, written with a plain ORM insert: the yardstick
    for what publish_event() costs on top of an ordinary write."""

    message_id = models.CharField(max_length=64, unique=True)
    topic = models.CharField(max_length=255)
    aggregate_type = models.CharField(max_length=255)
    aggregate_id = models.CharField(max_length=255)
    payload = models.JSONField()
    headers = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "benchapp"


class SoakAccount(models.Model):
    """The soak's business row: each writer transaction moves an account's ``seq`` on by
    the events it publishes, under the row lock, so ``seq`` orders an aggregate's events."""

    seq = models.BigIntegerField(default=0)
    balance = models.BigIntegerField(default=0)

    class Meta:
        app_label = "benchapp"
