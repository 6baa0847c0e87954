"""The dead events' two-step admin actions: redrive and delete.

Both run the same skeleton, :func:`run_confirmed`: take the selection (at most
:data:`MAX_ACTION_ROWS`), show a confirmation page with a sample, and once confirmed lock
the selected rows that are still dead, change exactly those in one transaction, write
their admin history and say how many changed and how many were left alone. What differs
is a :class:`ConfirmedAction`: what its page asks, how it previews, what it does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import django
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.functional import Promise
from django.utils.translation import gettext, gettext_lazy, ngettext, ngettext_lazy

from .maintenance import RedriveSelection, delete_dead, redrive
from .models import OutboxEvent

#: Most rows one action may touch: the ids travel as one IN list, and SQL Server accepts
#: at most 2,100 parameters a statement. Bigger clean-ups belong to ``outbox_redrive``
#: and ``outbox_purge``, which select by filter instead of by id.
MAX_ACTION_ROWS = 1000

#: Rows listed on an action's confirmation page.
SAMPLE_SIZE = 20

#: Longest redrive note kept in a row's admin history (the last error runs to 4,000).
REDRIVE_LOG_LENGTH = 1000

#: The page that asks before an action changes anything.
CONFIRMATION_TEMPLATE = "admin/eventferry_django/deadoutboxevent/action_confirmation.html"

#: What an action previews: the rows it would change, and a sample of them to list.
Preview = tuple[int, list[OutboxEvent]]


@dataclass(frozen=True)
class ConfirmedAction:
    """One two-step action: the confirmation page's words (``question`` and ``done``
    are plurals taking ``count``) and its two steps, each given the ``ModelAdmin``, the
    request and the database of the selection."""

    name: str
    title: Promise
    question: Promise
    button: Promise
    done: Promise
    #: The selected ids -> what the action would change.
    preview: Callable[[admin.ModelAdmin[Any], HttpRequest, list[int], str], Preview]
    #: The selected rows still dead, locked -> how many it changed.
    apply: Callable[[admin.ModelAdmin[Any], HttpRequest, list[OutboxEvent], str], int]


def run_confirmed(model_admin: admin.ModelAdmin[Any], request: HttpRequest,
                  queryset: QuerySet[OutboxEvent], action: ConfirmedAction
                  ) -> HttpResponse | None:
    """Ask, or (the confirmation posted) do ``action`` to the selection."""
    ids = selected_ids(model_admin, request, queryset)
    if ids is None:
        return None
    if request.POST.get("post") != "yes":
        count, sample = action.preview(model_admin, request, ids, queryset.db)
        return confirmation(model_admin, request, ids, action, count, sample)
    with transaction.atomic(using=queryset.db):
        # Locked until the transaction ends, so the history written names exactly the
        # rows the action changes.
        still_dead = list(model_admin.get_queryset(request).select_for_update()
                          .filter(pk__in=ids).order_by("id"))
        changed = (action.apply(model_admin, request, still_dead, queryset.db)
                   if still_dead else 0)
    model_admin.message_user(request, action.done % {"count": changed}, messages.SUCCESS)
    skipped = len(ids) - changed
    if skipped > 0:
        model_admin.message_user(request, ngettext(
            "%(count)d selected event was no longer dead and was left alone.",
            "%(count)d selected events were no longer dead and were left alone.",
            skipped,
        ) % {"count": skipped}, messages.WARNING)
    return None


def selected_ids(model_admin: admin.ModelAdmin[Any], request: HttpRequest,
                 queryset: QuerySet[OutboxEvent]) -> list[int] | None:
    """The selection's ids, or None (the user told why) when there is nothing to do."""
    ids = list(queryset.order_by("id").values_list("pk", flat=True)[: MAX_ACTION_ROWS + 1])
    if not ids:
        # All of them were redriven or deleted since the page was shown.
        model_admin.message_user(request, gettext(
            "None of the selected events is dead any more; nothing was changed."
        ), messages.WARNING)
        return None
    if len(ids) > MAX_ACTION_ROWS:
        model_admin.message_user(request, gettext(
            "An action handles at most %(limit)d events at a time; nothing was changed. "
            "Narrow the selection, or use the outbox_redrive / outbox_purge commands, "
            "which select by filter."
        ) % {"limit": MAX_ACTION_ROWS}, messages.WARNING)
        return None
    return ids


def confirmation(model_admin: admin.ModelAdmin[Any], request: HttpRequest, ids: list[int],
                 action: ConfirmedAction, rows: int, sample: list[OutboxEvent]
                 ) -> TemplateResponse:
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": action.title,
        "question": action.question % {"count": rows},
        "button": action.button,
        "action": action.name,
        "rows": rows,
        "sample": sample,
        "more": max(rows - len(sample), 0),
        "ids": ids,
        "action_checkbox_name": ACTION_CHECKBOX_NAME,
        "media": model_admin.media,
    }
    return TemplateResponse(request, CONFIRMATION_TEMPLATE, context)


# -- redrive ------------------------------------------------------------------------------
def _preview_redrive(model_admin: admin.ModelAdmin[Any], request: HttpRequest,
                     ids: list[int], using: str) -> Preview:
    preview = redrive(RedriveSelection(ids=ids), dry_run=True, using=using)
    return preview.rows, preview.sample


def _redrive(model_admin: admin.ModelAdmin[Any], request: HttpRequest,
             rows: list[OutboxEvent], using: str) -> int:
    redriven = redrive(RedriveSelection(ids=[row.pk for row in rows]), using=using).rows
    # Each row's history says what it was before: the redrive resets both.
    for row in rows:
        model_admin.log_change(request, row, (
            f"Redriven: back to pending after {row.attempts} attempt(s); "
            f"last error: {row.last_error or '(none)'}"
        )[:REDRIVE_LOG_LENGTH])
    return redriven


REDRIVE = ConfirmedAction(
    name="redrive_selected",
    title=gettext_lazy("Redrive dead events"),
    question=ngettext_lazy(
        "%(count)d dead event will go back to pending, with attempts and error reset, and "
        "be published again.",
        "%(count)d dead events will go back to pending, with attempts and error reset, "
        "and be published again.", "count"),
    button=gettext_lazy("Yes, redrive them"),
    done=ngettext_lazy("Redrove %(count)d event.", "Redrove %(count)d events.", "count"),
    preview=_preview_redrive,
    apply=_redrive,
)


# -- delete -------------------------------------------------------------------------------
def _preview_delete(model_admin: admin.ModelAdmin[Any], request: HttpRequest,
                    ids: list[int], using: str) -> Preview:
    sample = model_admin.get_queryset(request).filter(pk__in=ids).order_by("id")[:SAMPLE_SIZE]
    return len(ids), list(sample)


def _delete(model_admin: admin.ModelAdmin[Any], request: HttpRequest,
            rows: list[OutboxEvent], using: str) -> int:
    # Deletion history as Django's own delete action writes it: log_deletions (one bulk
    # insert) from Django 5.1, log_deletion per row before.
    if django.VERSION >= (5, 1):
        model_admin.log_deletions(request, model_admin.get_queryset(request).filter(
            pk__in=[row.pk for row in rows]).order_by("id"))
    else:
        for row in rows:
            model_admin.log_deletion(request, row, str(row))  # type: ignore[attr-defined]
    return delete_dead([row.pk for row in rows], using=using)


DELETE = ConfirmedAction(
    name="delete_selected_dead",
    title=gettext_lazy("Delete dead events"),
    question=ngettext_lazy("%(count)d dead event will be deleted for good.",
                           "%(count)d dead events will be deleted for good.", "count"),
    button=gettext_lazy("Yes, delete them"),
    done=ngettext_lazy("Deleted %(count)d dead event.", "Deleted %(count)d dead events.",
                       "count"),
    preview=_preview_delete,
    apply=_delete,
)
