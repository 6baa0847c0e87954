"""The system check of the ``OutboxTaskBackend`` entries of Django's ``TASKS`` setting.

Registered by the app (``manage.py check --tag eventferry``), so it runs whether or not
the Tasks framework registered its own checks (Django 6.0 registers them only once
``django.tasks`` is imported; the backport only as an installed app). It reads ``TASKS``
without building any backend. The ids have a namespace of their own
(``eventferry.tasks.E...``): they concern ``TASKS``, not ``EVENTFERRY``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings as django_settings
from django.core import checks
from django.utils.module_loading import import_string

from . import task_api

#: The dotted path ``TASKS`` names the backend by.
BACKEND_PATH = "eventferry_django.task_backend.OutboxTaskBackend"
#: The OPTIONS an ``OutboxTaskBackend`` takes.
OPTION_NAMES = ("celery_app", "database", "allow_autocommit")
TAG = "eventferry"


@checks.register(TAG)
def check_task_backends(**kwargs: Any) -> list[checks.CheckMessage]:
    tasks = getattr(django_settings, "TASKS", None)
    if not isinstance(tasks, Mapping):
        return []
    messages: list[checks.CheckMessage] = []
    for alias, params in tasks.items():
        if not isinstance(params, Mapping) or not _is_outbox_backend(params.get("BACKEND")):
            continue
        if not task_api.AVAILABLE:
            messages.append(checks.Error(
                f"TASKS[{alias!r}] names OutboxTaskBackend, but neither django.tasks "
                "(Django 6.0) nor the django-tasks backport is installed.",
                hint='pip install "eventferry-django[tasks]"', id="eventferry.tasks.E005"))
            continue
        options = params.get("OPTIONS", {})
        messages += check_options(alias, options if isinstance(options, Mapping) else {})
    return messages


def _is_outbox_backend(path: object) -> bool:
    if path == BACKEND_PATH:
        return True
    if not isinstance(path, str) or not task_api.AVAILABLE:
        return False
    try:
        found = import_string(path)
    except ImportError:
        return False  # the framework's own check reports a backend it cannot import
    from .task_backend import OutboxTaskBackend

    return isinstance(found, type) and issubclass(found, OutboxTaskBackend)


def check_options(alias: str, options: Mapping[str, Any]) -> list[checks.CheckMessage]:
    """What is wrong with an ``OutboxTaskBackend``'s OPTIONS, as system check errors."""
    where = f"TASKS[{alias!r}]['OPTIONS']"
    hint = "See docs/tasks.md for OutboxTaskBackend's OPTIONS."
    messages: list[checks.CheckMessage] = []
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        messages.append(checks.Error(
            f"{where} has unknown keys {unknown}; it takes {', '.join(OPTION_NAMES)}.",
            hint=hint, id="eventferry.tasks.E001"))
    app = options.get("celery_app")
    problem = None
    if not isinstance(app, str) or not app.strip():
        problem = "is required: the dotted path of the Celery app whose workers run tasks"
    else:
        try:
            target = import_string(app)
        except ImportError as exc:
            problem = f"cannot be imported: {exc}"
        else:
            if not callable(getattr(target, "send_task", None)):
                problem = "is not a Celery app (it has no send_task)"
    if problem is not None:
        messages.append(checks.Error(f"{where}['celery_app'] is {app!r}: {problem}.",
                                     hint=hint, id="eventferry.tasks.E002"))
    database = options.get("database")
    if database is not None and database not in django_settings.DATABASES:
        messages.append(checks.Error(
            f"{where}['database'] is {database!r}, which is not a key of DATABASES.",
            hint=hint, id="eventferry.tasks.E003"))
    autocommit = options.get("allow_autocommit", False)
    if not isinstance(autocommit, bool):
        messages.append(checks.Error(
            f"{where}['allow_autocommit'] is {autocommit!r}: must be True or False.",
            hint=hint, id="eventferry.tasks.E004"))
    return messages
