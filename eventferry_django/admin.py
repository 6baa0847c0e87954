"""The outbox and the inbox in Django's admin (and, from :mod:`.task_admin`, the results
of Django tasks).

Three entries: *outbox events*, a read-only window on every row; *dead outbox events*
(the ``DeadOutboxEvent`` proxy, so it has permissions of its own), grouped by error, whose
actions redrive through ``operations.redrive`` (the code path of ``outbox_redrive``) or
delete; and *inbox messages*, read-only, to answer "did this consumer handle that
message?". All are built to stay cheap on a table of millions of rows: no full count, no
``SELECT DISTINCT`` filter choices, searches that an index can answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import django
from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth import get_permission_codename
from django.db.models import Count, F, Field, Max, Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import gettext, gettext_lazy

from .admin_actions import DELETE, REDRIVE, run_confirmed
from .admin_filters import StatusFilter
from .conf import get_settings
from .maintenance import delete_dead
from .models import DeadOutboxEvent, InboxMessage, OutboxEvent, Status

#: Error groups shown above the dead events list.
ERROR_GROUP_LIMIT = 50

#: An error longer than this is linked by its prefix, keeping the link's URL well under
#: the 8 KiB that common proxies accept (``last_error`` holds up to 4,000 characters).
ERROR_LINK_PREFIX = 500


def pretty_json(text: str) -> str:
    """JSON text indented inside ``<pre>``, escaped; text that is not JSON is shown as is."""
    try:
        shown = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        shown = text
    return format_html('<pre class="eventferry-json">{}</pre>', shown)


def ago(moment: datetime | None) -> str | None:
    return gettext("%(age)s ago") % {"age": timesince(moment, depth=1)} if moment else None


@dataclass(frozen=True)
class ErrorGroup:
    error: str | None
    count: int
    newest: datetime | None


def error_groups(events: QuerySet[Any], limit: int = ERROR_GROUP_LIMIT) -> list[ErrorGroup]:
    """Count ``events`` per distinct ``last_error``, most recently processed first.

    One ``GROUP BY last_error`` query. ``order_by()`` first drops the admin's ``-id``
    ordering, which would otherwise be added to the GROUP BY and split every group.
    """
    rows = (
        events.order_by()
        .values("last_error")
        .annotate(count=Count("id"), newest=Max("processed_at"))
        # NULLS LAST spelled out: PostgreSQL would list descending NULLs first.
        .order_by(F("newest").desc(nulls_last=True), "-count")[:limit]
    )
    return [ErrorGroup(row["last_error"], row["count"], row["newest"]) for row in rows]


class ExactValueFilter(admin.FieldListFilter):
    """A text box for an exact value.

    Django's default filter for a text column lists its choices with ``SELECT DISTINCT``
    over the whole column on every page load: a full scan of a large outbox.
    """

    template = "admin/eventferry_django/exact_value_filter.html"

    def __init__(
        self,
        field: Field[Any, Any],
        request: HttpRequest,
        params: dict[str, Any],
        model: type[Model],
        model_admin: admin.ModelAdmin[Any],
        field_path: str,
    ) -> None:
        super().__init__(field, request, params, model, model_admin, field_path)
        self.value = request.GET.get(field_path, "").strip()
        if not self.value:
            # An emptied box means "any", not "equals the empty string".
            self.used_parameters.pop(field_path, None)
        # The form replaces the query string: carry the other filters, search and
        # ordering along, but not the page number, which may not exist once filtered.
        self.carried = [
            (name, value)
            for name, values in request.GET.lists()
            if name not in {field_path, "p"}
            for value in values
        ]

    def expected_parameters(self) -> list[str | None]:
        return [self.field_path]

    def choices(self, changelist: ChangeList) -> Iterator[Any]:
        # Only the "All" link that clears the box; the template draws the box itself.
        yield {
            "selected": bool(self.value),
            "query_string": changelist.get_query_string(remove=[self.field_path]),
            "display": gettext("All"),
        }


if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[OutboxEvent]
    _InboxModelAdmin = admin.ModelAdmin[InboxMessage]
else:
    # ModelAdmin is generic only to the type checker (django-stubs), not at run time.
    _ModelAdmin = _InboxModelAdmin = admin.ModelAdmin


class _EventAdminBase(_ModelAdmin):
    """What both entries share: read-only rows, cheap listing, pretty JSON."""

    # Exact and prefix lookups only, answered by the unique message_id index and the
    # (aggregate_id, id) index; "icontains" over a big table would be a full scan.
    search_fields = ("message_id__exact", "aggregate_id__startswith")
    search_help_text = gettext_lazy("An exact message id, or the start of an aggregate id.")
    ordering = ("-id",)
    # A second, unfiltered COUNT(*) per page is a full scan on a big outbox.
    show_full_result_count = False
    if django.VERSION >= (5, 0):
        # Facets are a COUNT per filter choice over every matching row, on each page load.
        show_facets = admin.ShowFacets.NEVER
    fieldsets = (
        (None, {"fields": (
            "id", "message_id", "status", "topic", ("aggregate_type", "aggregate_id"),
            "partition_key", "trace_id",
        )}),
        (gettext_lazy("Delivery"), {"fields": (
            "attempts", "created_at", "claimed_at", "next_retry_at", "processed_at",
            "last_error",
        )}),
        (gettext_lazy("Message"), {"fields": ("schema_version", "payload_json",
                                              "headers_json")}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[OutboxEvent]:
        # The outbox lives where the relay and the commands look for it.
        return super().get_queryset(request).using(get_settings().database)

    def get_readonly_fields(
        self, request: HttpRequest, obj: OutboxEvent | None = None
    ) -> list[str]:
        return flatten_fieldsets(self.fieldsets)

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Events are written by publish_event() in the business transaction, never by hand.
        return False

    def has_change_permission(self, request: HttpRequest, obj: OutboxEvent | None = None) -> bool:
        # The relay owns status, attempts and leases; moving a row back is redrive's job.
        return False

    @admin.display(description=gettext_lazy("aggregate"))
    def aggregate(self, obj: OutboxEvent) -> str:
        return f"{obj.aggregate_type}/{obj.aggregate_id}"

    @admin.display(description=gettext_lazy("age"), ordering="created_at")
    def age(self, obj: OutboxEvent) -> str | None:
        return ago(obj.created_at)

    @admin.display(description=gettext_lazy("processed"), ordering="processed_at")
    def processed_age(self, obj: OutboxEvent) -> str | None:
        return ago(obj.processed_at)

    @admin.display(description=gettext_lazy("payload"))
    def payload_json(self, obj: OutboxEvent) -> str:
        return pretty_json(obj.payload)

    @admin.display(description=gettext_lazy("headers"))
    def headers_json(self, obj: OutboxEvent) -> str:
        return pretty_json(obj.headers)


@admin.register(OutboxEvent)
class OutboxEventAdmin(_EventAdminBase):
    list_display = (
        "id", "state", "topic", "aggregate", "attempts", "age", "processed_age",
    )
    list_filter = (
        StatusFilter, ("topic", ExactValueFilter), ("aggregate_type", ExactValueFilter),
    )

    @admin.display(description=gettext_lazy("status"), ordering="status")
    def state(self, obj: OutboxEvent) -> str:
        """The status, a pending event scheduled ahead shown as such (by this server's
        clock; the relay goes by the database's)."""
        ahead = obj.next_retry_at
        if obj.status == Status.PENDING and ahead is not None and ahead > timezone.now():
            return gettext("scheduled, in %(time)s") % {"time": timeuntil(ahead)}
        return str(obj.get_status_display())

    def has_delete_permission(self, request: HttpRequest, obj: OutboxEvent | None = None) -> bool:
        # Deleting an open row would silently drop a message; only dead rows may go, and
        # only from the dead events entry.
        return False


@admin.register(DeadOutboxEvent)
class DeadOutboxEventAdmin(_EventAdminBase):
    """Dead rows grouped by error, with redrive and delete.

    Permissions are the proxy's own: ``view_deadoutboxevent`` to look,
    ``redrive_deadoutboxevent`` and ``delete_deadoutboxevent`` for the actions.
    """

    # Narrower than the events list: the error needs the room, and "processed" is when
    # the row was given up on.
    list_display = ("id", "topic", "aggregate", "attempts", "error", "processed_age")
    list_filter = (
        ("topic", ExactValueFilter), ("aggregate_type", ExactValueFilter),
    )
    actions = ("redrive_selected", "delete_selected_dead")
    change_list_template = "admin/eventferry_django/deadoutboxevent/change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[OutboxEvent]:
        return super().get_queryset(request).filter(status=Status.DEAD)

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        # Django's own bulk delete would not re-check the status; ours does.
        actions.pop("delete_selected", None)
        return actions

    def has_redrive_permission(self, request: HttpRequest) -> bool:
        codename = get_permission_codename("redrive", self.opts)
        return request.user.has_perm(f"{self.opts.app_label}.{codename}")

    def delete_model(self, request: HttpRequest, obj: OutboxEvent) -> None:
        # The single-row delete page, fenced on status like the action.
        delete_dead([obj.pk], using=obj._state.db)

    @admin.display(description=gettext_lazy("last error"))
    def error(self, obj: OutboxEvent) -> str | None:
        return Truncator(obj.last_error).chars(120) if obj.last_error else None

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        # Only when the list itself is rendered: not for redirects, action confirmations
        # or a refused request.
        context = response.context_data if isinstance(response, TemplateResponse) else None
        if context is not None and "cl" in context:
            context["error_groups"] = [
                {"group": group, "url": self._error_url(group.error)}
                for group in error_groups(self.get_queryset(request))
            ]
            context["error_group_limit"] = ERROR_GROUP_LIMIT
        return response

    def _error_url(self, error: str | None) -> str:
        if error is None:
            query = {"last_error__isnull": "True"}
        elif len(error) <= ERROR_LINK_PREFIX:
            query = {"last_error": error}
        else:
            query = {"last_error__startswith": error[:ERROR_LINK_PREFIX]}
        changelist = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_changelist",
            current_app=self.admin_site.name,
        )
        return f"{changelist}?{urlencode(query)}"

    @admin.action(description=gettext_lazy("Redrive selected dead events"),
                  permissions=["redrive"])
    def redrive_selected(
        self, request: HttpRequest, queryset: QuerySet[OutboxEvent]
    ) -> HttpResponse | None:
        return run_confirmed(self, request, queryset, REDRIVE)

    @admin.action(description=gettext_lazy("Delete selected dead events"),
                  permissions=["delete"])
    def delete_selected_dead(
        self, request: HttpRequest, queryset: QuerySet[OutboxEvent]
    ) -> HttpResponse | None:
        return run_confirmed(self, request, queryset, DELETE)


@admin.register(InboxMessage)
class InboxMessageAdmin(_InboxModelAdmin):
    """The consumers' records, read-only: they are written by the inbox in the handlers'
    transactions and deleted by ``outbox_purge --inbox``."""

    list_display = ("message_id", "consumer", "handled_at")
    list_filter = (("consumer", ExactValueFilter),)
    # Answered by the unique (consumer, message id) index once a consumer is chosen.
    search_fields = ("message_id__exact",)
    search_help_text = gettext_lazy("An exact message id.")
    ordering = ("-id",)
    show_full_result_count = False
    if django.VERSION >= (5, 0):
        show_facets = admin.ShowFacets.NEVER

    def get_queryset(self, request: HttpRequest) -> QuerySet[InboxMessage]:
        return super().get_queryset(request).using(get_settings().database)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: InboxMessage | None = None
                              ) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: InboxMessage | None = None
                              ) -> bool:
        # Deleting a record makes a redelivery of its message run again.
        return False


# The Django tasks' results, beside the dead events.
from . import task_admin  # noqa: E402,F401
