"""Migration operations that create eventferry's tables with hand-written vendor DDL.

They carry no model state: each migration wraps one in ``SeparateDatabaseAndState`` next
to a ``CreateModel``, so Django keeps tracking the model and ``makemigrations --check``
still catches drift between the model and the migrations.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.operations.base import Operation
from django.db.migrations.state import ProjectState

from .ddl import TableKind, create_statements, drop_statements


class CreateTable(Operation):
    """Runs one table's guarded DDL forwards and drops the table backwards.

    The DDL is idempotent, so applying it to a database where a DBA already created part
    of the table repairs what is missing and leaves the data alone. Subclasses name the
    table and the model whose router decision applies.
    """

    reversible = True
    reduces_to_sql = True
    table: ClassVar[TableKind]
    model_name: ClassVar[str]

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        """No state: the ``CreateModel`` beside this operation carries it."""

    def _run(
        self, app_label: str, schema_editor: BaseDatabaseSchemaEditor, state: ProjectState,
        statements: list[str],
    ) -> None:
        model = state.apps.get_model(app_label, self.model_name)
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
        self._run(app_label, schema_editor, to_state, create_statements(vendor, self.table))

    def database_backwards(
        self,
        app_label: str,
        schema_editor: BaseDatabaseSchemaEditor,
        from_state: ProjectState,
        to_state: ProjectState,
    ) -> None:
        vendor = schema_editor.connection.vendor
        self._run(app_label, schema_editor, from_state, drop_statements(vendor, self.table))

    def describe(self) -> str:
        return f"Create the {self.table} table and its indexes with vendor DDL"

    @property
    def migration_name_fragment(self) -> str:
        return f"create_{self.table}_table"

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return (self.__class__.__qualname__, [], {})


class CreateOutboxTable(CreateTable):
    table = "outbox"
    model_name = "outboxevent"


class CreateInboxTable(CreateTable):
    table = "inbox"
    model_name = "inboxmessage"
