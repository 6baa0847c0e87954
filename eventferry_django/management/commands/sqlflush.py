"""Django's ``sqlflush``, which also prints the SQL that empties eventferry's
schema-qualified tables: what this app's ``flush`` runs (see
:mod:`eventferry_django.flushing`)."""

from __future__ import annotations

from typing import Any

from django.core.management.commands import sqlflush
from django.db import connections

from ...flushing import flush_sql
from ._base import EventferryCommand


class Command(EventferryCommand, sqlflush.Command):
    help = sqlflush.Command.help + " eventferry's outbox and inbox included, in any schema."

    def handle(self, **options: Any) -> str:
        extra = flush_sql(connections[options["database"]], self.style)
        # Django's own SQL, without its "No tables found." when ours are there.
        django_sql = super().handle(**{**options, "verbosity": 0} if extra else options)
        return "\n".join(s for s in (*extra, django_sql) if s)
