"""Django's Tasks framework, wherever it comes from: ``django.tasks`` on Django 6.0 and
later, else the ``django-tasks`` backport (module ``django_tasks``, the ``tasks`` extra).

Everything of the framework that eventferry uses is imported here and only here, so the
two spellings differ in one module. :data:`AVAILABLE` is False when neither is installed;
the names are then missing and importing :mod:`.task_backend` raises ``ImportError``
saying what to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


def _framework() -> tuple[ModuleType, str] | None:
    for package in ("django.tasks", "django_tasks"):
        try:
            module = importlib.import_module(package)
        except ImportError:
            continue
        if hasattr(module, "task_backends"):
            return module, package
    return None


_found = _framework()

#: Whether a Tasks framework is installed.
AVAILABLE = _found is not None

#: ``"django.tasks"`` or ``"django_tasks"``; None when neither is installed.
PACKAGE: str | None = None if _found is None else _found[1]

if _found is not None:
    _package = _found[1]
    _base = importlib.import_module(f"{_package}.base")
    _backends = importlib.import_module(f"{_package}.backends.base")
    _exceptions = importlib.import_module(f"{_package}.exceptions")
    _signals = importlib.import_module(f"{_package}.signals")

    task_backends: Any = _found[0].task_backends
    BaseTaskBackend: Any = _backends.BaseTaskBackend
    Task: Any = _base.Task
    TaskContext: Any = _base.TaskContext
    TaskError: Any = _base.TaskError
    TaskResult: Any = _base.TaskResult
    TaskResultStatus: Any = _base.TaskResultStatus
    # The backport calls them ...Error; Django 6.0 dropped the suffix.
    InvalidTask: Any = (getattr(_exceptions, "InvalidTaskError", None)
                        or _exceptions.InvalidTask)
    TaskResultDoesNotExist: Any = _exceptions.TaskResultDoesNotExist
    task_enqueued: Any = _signals.task_enqueued
    task_started: Any = _signals.task_started
    task_finished: Any = _signals.task_finished
    #: The ``@task`` decorator.
    task: Any = _found[0].task


def require() -> None:
    """Raise ``ImportError`` saying what to install when no Tasks framework is."""
    if not AVAILABLE:
        raise ImportError(
            "eventferry's task backend needs Django's Tasks framework: Django 6.0 or later "
            '(django.tasks), or pip install "eventferry-django[tasks]" (the django-tasks '
            "backport) on Django 4.2/5.2."
        )
