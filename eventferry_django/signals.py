"""Signals sent by eventferry.

``events_committed`` is sent once per ``publish_event()``/``publish_events()`` call,
after the surrounding transaction commits (never for a rolled-back one), with
``message_ids`` (list of str), ``topics`` (list of str) and ``using`` (the alias).
An in-process relay listens to it to wake up early; metrics may count with it.
"""

from django.dispatch import Signal

events_committed = Signal()

#: Sent after ``operations.redrive`` moved rows back to pending, with ``count`` and ``using``.
events_redriven = Signal()
