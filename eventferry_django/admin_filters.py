"""The outbox admin's status filter, which tells scheduled events from pending ones."""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy

from .models import OutboxEventQuerySet, Status

#: The filter's value for pending events whose delivery time is still ahead.
SCHEDULED = "scheduled"


class StatusFilter(admin.SimpleListFilter):
    """The stored statuses, with *pending* split into *pending* (a relay may take it
    now) and *scheduled* (``deliver_at`` still ahead, by the database's clock); *claimed*
    is the rows of the relays' batches in flight, which the journal of batches in flight
    names (a claim writes nothing to its rows)."""

    title = gettext_lazy("status")
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        choices: list[tuple[str, Any]] = [(str(s.value), s.label) for s in Status]
        choices.insert(1, (SCHEDULED, gettext_lazy("scheduled")))
        return choices

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        events = cast(OutboxEventQuerySet, queryset)  # the model's own manager made it
        if value == SCHEDULED:
            return events.scheduled()
        if value == str(Status.PENDING.value):
            return events.due()
        if value == str(Status.CLAIMED.value):
            return events.in_flight()
        if value in {str(s.value) for s in Status}:
            return events.filter(status=int(value))
        return queryset
