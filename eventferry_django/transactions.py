"""The rule eventferry's writers share: they write inside the caller's transaction, on
the database the caller's own changes go to."""

from __future__ import annotations

from django.db import connections

from .exceptions import NotInTransaction


def require_transaction(alias: str, what: str, purpose: str) -> None:
    """Raise :class:`NotInTransaction` unless a transaction is open on ``alias``.

    ``what`` names the call (``"publish_event()"``), ``purpose`` says why it needs the
    transaction. When another alias has one open, the caller most likely meant that
    database, so the message names it.
    """
    if connections[alias].in_atomic_block:
        return
    open_elsewhere = [
        other for other in connections
        if other != alias and connections[other].in_atomic_block
    ]
    elsewhere = (
        f" A transaction is open on {', '.join(map(repr, open_elsewhere))}, not on "
        f"{alias!r}: pass using= naming the database your changes go to."
        if open_elsewhere else ""
    )
    raise NotInTransaction(
        f"{what} must run inside transaction.atomic(using={alias!r}) so {purpose}; "
        f"nothing was written.{elsewhere}"
    )
