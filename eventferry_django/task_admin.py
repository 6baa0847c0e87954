"""The results of Django tasks (``OutboxTaskBackend``) in Django's admin, beside the dead
events: read-only, written by the backend and the runner, deleted by ``outbox_purge
--task-results``. Registered by :mod:`eventferry_django.admin`. Built to stay cheap on a
large table, as the outbox's entries are: no full count, no facets."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import django
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.translation import gettext_lazy

from .conf import get_settings
from .models import TaskResultRecord

if TYPE_CHECKING:
    _ModelAdmin = admin.ModelAdmin[TaskResultRecord]
else:
    _ModelAdmin = admin.ModelAdmin


class TaskResultAdmin(_ModelAdmin):
    list_display = ("result_id", "task_path", "status", "queue_name", "attempts",
                    "enqueued_at", "finished_at")
    list_filter = ("status",)
    # Answered by the unique result id index.
    search_fields = ("result_id__exact",)
    search_help_text = gettext_lazy("An exact result id (the task's outbox message id).")
    ordering = ("-id",)
    show_full_result_count = False
    if django.VERSION >= (5, 0):
        show_facets = admin.ShowFacets.NEVER
    fields = ("result_id", "task_path", "backend", "queue_name", "status", "run_after",
              "enqueued_at", "started_at", "last_attempted_at", "finished_at", "attempts",
              "workers", "arguments_json", "return_value_json", "tracebacks")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[TaskResultRecord]:
        return super().get_queryset(request).using(get_settings().database)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # outbox_purge --task-results deletes finished results; a READY row deleted here
        # would leave its task without a result.
        return False

    @admin.display(description=gettext_lazy("workers"))
    def workers(self, obj: TaskResultRecord) -> str:
        return ", ".join(obj.worker_ids or [])

    @admin.display(description=gettext_lazy("arguments"))
    def arguments_json(self, obj: TaskResultRecord) -> str:
        return _pre(obj.arguments)

    @admin.display(description=gettext_lazy("return value"))
    def return_value_json(self, obj: TaskResultRecord) -> str:
        return _pre(None if obj.return_value is None else obj.return_value.get("value"))

    @admin.display(description=gettext_lazy("errors"))
    def tracebacks(self, obj: TaskResultRecord) -> str:
        return format_html("<pre>{}</pre>", "\n\n".join(
            error.get("traceback", "") for error in obj.errors or []))


def _pre(value: Any) -> str:
    return format_html("<pre>{}</pre>", json.dumps(value, indent=2, ensure_ascii=False))


admin.site.register(TaskResultRecord, TaskResultAdmin)
