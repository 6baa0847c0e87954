"""A migration operation that creates the outbox table with hand-written vendor DDL.

It carries no model state: the initial migration wraps it in ``SeparateDatabaseAndState``
next to a ``CreateModel``, so Django keeps tracking the model and ``makemigrations
--check`` still catches drift between the model and the migrations.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.operations.base import Operation
from django.db.migrations.state import ProjectState

from .ddl import create_statements, drop_statements

MODEL_NAME = "outboxevent"


class CreateOutboxTable(Operation):
    """Runs the guarded DDL forwards and drops the table backwards.

    The DDL is idempotent, so applying it to a database where a DBA already created part
    of the table repairs what is missing and leaves the data alone.
    """

    reversible = True
    reduces_to_sql = True

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        """No state: the ``CreateModel`` beside this operation carries it."""

    def _run(
        self, app_label: str, schema_editor: BaseDatabaseSchemaEditor, state: ProjectState,
        statements: list[str],
    ) -> None:
        model = state.apps.get_model(app_label, MODEL_NAME)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        for statement in statements:
            # params=None: the SQL is sent verbatim, never %-formatted.
            schema_editor.execute(statement, params=None)

    def database_forwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        vendor = schema_editor.connection.vendor
        self._run(app_label, schema_editor, to_state, create_statements(vendor))

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        vendor = schema_editor.connection.vendor
        self._run(app_label, schema_editor, from_state, drop_statements(vendor))

    def describe(self) -> str:
        return "Create the outbox table and its indexes with vendor DDL"

    @property
    def migration_name_fragment(self) -> str:
        return "create_outbox_table"

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return (self.__class__.__qualname__, [], {})

