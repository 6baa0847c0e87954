"""Every error eventferry raises derives from :class:`EventferryError`."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured


class EventferryError(Exception):
    """Base class of every eventferry error."""


class ConfigurationError(EventferryError, ImproperlyConfigured):
    """The ``EVENTFERRY`` setting (or an argument standing in for it) is invalid."""


class InvalidEvent(EventferryError, ValueError):
    """An event handed to ``publish_event()`` cannot be stored; the message names the field."""


class NotInTransaction(EventferryError, RuntimeError):
    """``publish_event()`` was called outside ``transaction.atomic()`` on its database."""


class UnsupportedDatabase(EventferryError, ImproperlyConfigured):
    """The database backend is not one eventferry has a store for."""


class InvalidMessage(EventferryError, ValueError):
    """A message handed to the inbox cannot be recorded: no usable message id, or a
    consumer name that cannot be stored. The message names which."""


class TaskNotDelivered(EventferryError):
    """A Django task's outbox row went dead: the relay gave up delivering it to a worker.
    What ``get_result()`` reports as the failed task's error, with the row's last error
    as its traceback."""
