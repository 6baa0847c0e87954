"""Django's ``flush``, which also empties eventferry's schema-qualified tables.

It overrides Django's own command (an app's command of the same name wins), so
``manage.py flush`` and every ``TransactionTestCase`` teardown use it; see
:mod:`eventferry_django.flushing` for why Django's alone leaves their rows.
"""

from __future__ import annotations

from typing import Any

from django.core.management.color import no_style
from django.core.management.commands import flush
from django.db import connections

from ...flushing import flush_sql
from ._base import EventferryCommand


class Command(EventferryCommand, flush.Command):
    help = flush.Command.help + " eventferry's outbox and inbox included, in any schema."

    def handle(self, **options: Any) -> None:
        connection = connections[options["database"]]
        extra = flush_sql(
            connection, no_style(),
            # The stealth options Django's test cases pass, with Django's defaults.
            reset_sequences=options.get("reset_sequences", True),
            allow_cascade=options.get("allow_cascade", False),
        )
        if not extra:
            super().handle(**options)
            return
        if options["interactive"] and not self.confirmed(connection.settings_dict["NAME"]):
            self.stdout.write("Flush cancelled.")
            return
        connection.ops.execute_sql_flush(extra)
        # Asked once, here: Django's own question would come after our tables were gone.
        super().handle(**{**options, "interactive": False})

    def confirmed(self, database: str) -> bool:
        answer = input(
            "You have requested a flush of the database.\n"
            f"This will IRREVERSIBLY DESTROY all data currently in the {database!r} database,\n"
            "eventferry's outbox and inbox included, and return each table to an empty "
            "state.\nAre you sure you want to do this?\n\n"
            "    Type 'yes' to continue, or 'no' to cancel: "
        )
        return answer == "yes"
