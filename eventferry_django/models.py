"""The outbox row and the inbox row as Django sees them.

The tables themselves are created by raw, vendor-specific DDL (see ``store/``); these
models map them for the ORM and the admin and are tracked by migrations so that drift
is detected.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connections, models
from django.db.models import Q
from django.db.models.expressions import RawSQL
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from .conf import orm_db_table
from .contract import OPEN, StatusCode, bucket_of
from .json_text import JsonTextField
from .store import DIALECTS
from .store.in_flight_journal import InFlightJournal


class Status(models.IntegerChoices):
    """Stored as TINYINT; the codes are part of the contract and never change."""

    PENDING = StatusCode.PENDING.value, _("pending")
    CLAIMED = StatusCode.CLAIMED.value, _("claimed")
    DONE = StatusCode.DONE.value, _("done")
    FAILED = StatusCode.FAILED.value, _("failed")
    DEAD = StatusCode.DEAD.value, _("dead")


#: States that hold back later events of the same aggregate.
OPEN_STATUSES = tuple(Status(code) for code in OPEN)


class OutboxEventQuerySet(models.QuerySet["OutboxEvent"]):
    def pending(self) -> OutboxEventQuerySet:
        return self.filter(status=Status.PENDING)

    def scheduled(self) -> OutboxEventQuerySet:
        """Pending events whose delivery time (``publish_event(..., deliver_at=...)``)
        is still ahead by the database's clock: no relay takes them before it."""
        return self._open_pending().filter(next_retry_at__gt=self._database_now())

    def due(self) -> OutboxEventQuerySet:
        """Pending events a relay may take now: never scheduled, or their time has come."""
        return self._open_pending().filter(
            Q(next_retry_at__isnull=True) | Q(next_retry_at__lte=self._database_now()))

    def _open_pending(self) -> OutboxEventQuerySet:
        # The open statuses spelled out as well: SQLite uses the partial claim index
        # only when the query repeats its predicate.
        return self.filter(status__in=OPEN_STATUSES).filter(status=Status.PENDING)

    def _database_now(self) -> RawSQL:
        now_sql = DIALECTS[connections[self.db].vendor].ops_class.now_sql
        return RawSQL(now_sql, (), output_field=models.DateTimeField())

    def in_flight(self) -> OutboxEventQuerySet:
        """Events in a relay's batch in flight now: claimed, on their way to the broker,
        not settled yet. A claim writes nothing to its rows (they stay pending), so the
        journal of batches in flight says which (docs/design/one-write.md)."""
        ids = [i for entry in InFlightJournal(self.db).entries() for i in entry.ids]
        return self.filter(id__in=ids)

    def done(self) -> OutboxEventQuerySet:
        return self.filter(status=Status.DONE)

    def failed(self) -> OutboxEventQuerySet:
        return self.filter(status=Status.FAILED)

    def dead(self) -> OutboxEventQuerySet:
        return self.filter(status=Status.DEAD)

    def open(self) -> OutboxEventQuerySet:
        """Events not yet delivered nor given up on: pending, claimed or failed."""
        return self.filter(status__in=OPEN_STATUSES)

    def for_aggregate(self, aggregate_type: str, aggregate_id: str) -> OutboxEventQuerySet:
        return self.filter(aggregate_type=aggregate_type, aggregate_id=aggregate_id)


class OutboxEvent(models.Model):
    id = models.BigAutoField(primary_key=True)
    message_id = models.CharField(_("message id"), max_length=64, unique=True)
    topic = models.CharField(_("topic"), max_length=255)
    aggregate_type = models.CharField(_("aggregate type"), max_length=255)
    aggregate_id = models.CharField(_("aggregate id"), max_length=255)
    partition_key = models.CharField(_("partition key"), max_length=255, null=True, blank=True)
    # JSON kept as the text that was validated and stored: the relay publishes it as-is.
    payload = models.TextField(_("payload"))
    headers = models.TextField(_("headers"), default="{}")
    trace_id = models.CharField(_("trace id"), max_length=255, null=True, blank=True)
    status = models.SmallIntegerField(_("status"), choices=Status.choices, default=Status.PENDING)
    attempts = models.IntegerField(_("attempts"), default=0)
    claimed_at = models.DateTimeField(_("claimed at"), null=True, blank=True)
    next_retry_at = models.DateTimeField(_("next retry at"), null=True, blank=True)
    # publish_event() leaves this to the database clock; the default only serves rows
    # created through the ORM directly.
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    processed_at = models.DateTimeField(_("processed at"), null=True, blank=True)
    last_error = models.CharField(_("last error"), max_length=4000, null=True, blank=True)
    # The version of the payload's schema the event was written with.
    schema_version = models.CharField(_("schema version"), max_length=255, null=True,
                                      blank=True)
    # The aggregate's bucket, by which relays share the work.
    bucket = models.SmallIntegerField(_("bucket"), null=True, blank=True, editable=False)

    objects = OutboxEventQuerySet.as_manager()

    class Meta:
        db_table = orm_db_table()
        verbose_name = _("outbox event")
        verbose_name_plural = _("outbox events")

    def __str__(self) -> str:
        return f"{self.topic} {self.message_id} ({self.get_status_display()})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A row made through the ORM lands in its aggregate's bucket as publish_event()'s
        # do (without one, any relay would take it, unshared).
        if self.bucket is None and self.aggregate_id:
            self.bucket = bucket_of(str(self.aggregate_id))
        super().save(*args, **kwargs)

    @property
    def payload_data(self) -> Any:
        """The payload decoded from its JSON text."""
        return json.loads(self.payload)

    @property
    def headers_data(self) -> dict[str, Any]:
        return dict(json.loads(self.headers))


class DeadOutboxEvent(OutboxEvent):
    """The same rows, as the admin's separate "dead events" entry.

    A proxy so the dead view has its own content type and therefore its own view and
    delete permissions, plus ``redrive_deadoutboxevent`` for the redrive action.
    """

    class Meta:
        proxy = True
        verbose_name = _("dead outbox event")
        verbose_name_plural = _("dead outbox events")
        permissions = (("redrive_deadoutboxevent", "Can redrive dead outbox events"),)


class InboxMessage(models.Model):
    """A message a consumer handled: the consumer side's memory of what it has done.

    Written by :mod:`eventferry_django.inbox` in the same transaction as the handler's own
    writes, so a message is either handled and recorded, or neither; the unique
    (consumer, message id) key turns a redelivery into a skip. Like the outbox, the table
    is created by vendor DDL (``store/``), and this model maps it.
    """

    id = models.BigAutoField(primary_key=True)
    consumer = models.CharField(_("consumer"), max_length=255)
    message_id = models.CharField(_("message id"), max_length=64)
    # The inbox leaves this to the database clock; the default serves ORM-made rows.
    handled_at = models.DateTimeField(_("handled at"), default=timezone.now)

    class Meta:
        db_table = orm_db_table("inbox")
        unique_together = (("consumer", "message_id"),)
        verbose_name = _("inbox message")
        verbose_name_plural = _("inbox messages")

    def __str__(self) -> str:
        return f"{self.consumer} {self.message_id}"


class TaskResultStatus(models.TextChoices):
    """The states of a Django task's result, spelled as ``django.tasks`` spells them."""

    READY = "READY", _("ready")
    RUNNING = "RUNNING", _("running")
    SUCCESSFUL = "SUCCESSFUL", _("successful")
    FAILED = "FAILED", _("failed")


#: States a task can still leave: its worker may (still) run it.
UNFINISHED_TASK_STATUSES = (TaskResultStatus.READY, TaskResultStatus.RUNNING)


class TaskResultQuerySet(models.QuerySet["TaskResultRecord"]):
    def unfinished(self) -> TaskResultQuerySet:
        return self.filter(status__in=UNFINISHED_TASK_STATUSES)

    def finished(self) -> TaskResultQuerySet:
        return self.filter(status__in=(TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED))

    def failed(self) -> TaskResultQuerySet:
        return self.filter(status=TaskResultStatus.FAILED)


class TaskResultRecord(models.Model):
    """The result of a Django task enqueued through
    :class:`~eventferry_django.task_backend.OutboxTaskBackend`: written with its outbox row,
    moved READY -> RUNNING -> SUCCESSFUL or FAILED by the worker that runs it. The table
    is created by vendor DDL beside the outbox; this model maps it."""

    id = models.BigAutoField(primary_key=True)
    result_id = models.CharField(_("result id"), max_length=64, unique=True)
    task_path = models.CharField(_("task"), max_length=255)
    backend = models.CharField(_("backend"), max_length=255)
    queue_name = models.CharField(_("queue"), max_length=255)
    priority = models.IntegerField(_("priority"), default=0)
    status = models.CharField(_("status"), max_length=64, choices=TaskResultStatus.choices,
                              default=TaskResultStatus.READY)
    # The JSON columns are JsonTextFields, not JSONFields: see eventferry_django.json_text.
    # {"args": [...], "kwargs": {...}}
    arguments = JsonTextField(_("arguments"))
    run_after = models.DateTimeField(_("run after"), null=True, blank=True)
    enqueued_at = models.DateTimeField(_("enqueued at"), default=timezone.now)
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    last_attempted_at = models.DateTimeField(_("last attempted at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    attempts = models.IntegerField(_("attempts"), default=0)
    worker_ids = JsonTextField(_("worker ids"), null=True, blank=True)
    # {"value": ...}: SQL Server's ISJSON check stores documents only.
    return_value = JsonTextField(_("return value"), null=True, blank=True)
    # [{"exception_class_path": ..., "traceback": ...}, ...]
    errors = JsonTextField(_("errors"), null=True, blank=True)

    objects = TaskResultQuerySet.as_manager()

    class Meta:
        db_table = orm_db_table("task_results")
        verbose_name = _("task result")
        verbose_name_plural = _("task results")

    def __str__(self) -> str:
        return f"{self.task_path} {self.result_id} ({self.get_status_display()})"
