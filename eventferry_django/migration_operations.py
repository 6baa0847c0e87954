"""The migration operation that runs a release's frozen, hand-written vendor DDL.

It carries no model state: the migration puts it beside a ``SeparateDatabaseAndState``
whose ``CreateModel`` records the model, so Django keeps tracking the models and
``makemigrations --check`` still catches drift between them and the migrations.

It names its release and table, and runs that release's frozen statements
(:mod:`.released_ddl`), filled with the table names the settings give: nothing here
renders DDL from today's code. Every release's migration uses this one operation, as
django-pgtrigger's migrations carry their compiled triggers.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.operations.base import Operation
from django.db.migrations.state import ProjectState

from .ddl import ROUTED_BY, TableKind, released, step


class RunReleasedDdl(Operation):
    """Runs ``release``'s guarded DDL for the ``table`` table forwards, and its reverse
    backwards, on a database the router lets that table's model migrate to.

    The DDL is idempotent, so applying it to a database where a DBA already created part
    of the table repairs what is missing and leaves the data alone.
    """

    reversible = True
    reduces_to_sql = True

    def __init__(self, release: str, table: TableKind) -> None:
        step(release, table)  # a clear error for a release or table that has no DDL
        self.release = release
        self.table = table

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        """No state: a ``CreateModel`` beside it carries the model, and Django does not
        track these indexes."""

    def _run(
        self, app_label: str, schema_editor: BaseDatabaseSchemaEditor, state: ProjectState,
        *, forwards: bool,
    ) -> None:
        model = state.apps.get_model(app_label, ROUTED_BY[self.table])
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        for statement in released(self.release, self.table, schema_editor.connection.vendor,
                                  forwards=forwards):
            # params=None: the SQL is sent verbatim, never %-formatted.
            schema_editor.execute(statement, params=None)

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        self._run(app_label, schema_editor, to_state, forwards=True)

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        self._run(app_label, schema_editor, from_state, forwards=False)

    def describe(self) -> str:
        return f"Run release {self.release}'s vendor DDL for the {self.table} table"

    @property
    def migration_name_fragment(self) -> str:
        return f"{self.table}_{self.release.replace('.', '_')}"

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return (self.__class__.__qualname__, [], {"release": self.release, "table": self.table})
