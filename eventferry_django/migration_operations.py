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

from .ddl import (
    TableKind,
    autovacuum_statements,
    closed_rows_index_statements,
    create_statements,
    drop_statements,
    open_rows_index_statements,
)


class VendorDdl(Operation):
    """Runs hand-written vendor DDL on a database the router lets the model migrate to.
    Subclasses name the model whose router decision applies and the statements."""

    reversible = True
    reduces_to_sql = True
    model_name: ClassVar[str]

    def statements(self, vendor: str, *, forwards: bool) -> list[str]:
        """The DDL to run on ``vendor``, forwards or backwards."""
        raise NotImplementedError

    def state_forwards(self, app_label: str, state: ProjectState) -> None:
        """No state: a ``CreateModel`` beside the table's creation carries it, and Django
        does not track these indexes."""

    def _run(
        self, app_label: str, schema_editor: BaseDatabaseSchemaEditor, state: ProjectState,
        *, forwards: bool,
    ) -> None:
        model = state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        for statement in self.statements(schema_editor.connection.vendor, forwards=forwards):
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

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return (self.__class__.__qualname__, [], {})


class CreateTable(VendorDdl):
    """Runs one table's guarded DDL forwards and drops the table backwards.

    The DDL is idempotent, so applying it to a database where a DBA already created part
    of the table repairs what is missing and leaves the data alone. Subclasses name the
    table.
    """

    table: ClassVar[TableKind]

    def statements(self, vendor: str, *, forwards: bool) -> list[str]:
        return (create_statements if forwards else drop_statements)(vendor, self.table)

    def describe(self) -> str:
        return f"Create the {self.table} table and its indexes with vendor DDL"

    @property
    def migration_name_fragment(self) -> str:
        return f"create_{self.table}_table"


class CreateOutboxTable(CreateTable):
    table = "outbox"
    model_name = "outboxevent"


class CreateInboxTable(CreateTable):
    table = "inbox"
    model_name = "inboxmessage"


class CreateRelayRegistry(CreateTable):
    """The relay registry beside the outbox, on the outbox's database (no model: only
    the relays read and write it)."""

    table = "relays"
    model_name = "outboxevent"

    def describe(self) -> str:
        return "Create the relay registry beside the outbox with vendor DDL"

    @property
    def migration_name_fragment(self) -> str:
        return "relay_registry"


class ReplaceAggregateIndex(VendorDdl):
    """Swaps the outbox's first-release head-of-aggregate index for the open-rows index
    (and back when reversed); each step guarded, so it is idempotent."""

    model_name = "outboxevent"

    def statements(self, vendor: str, *, forwards: bool) -> list[str]:
        return open_rows_index_statements(vendor, forwards=forwards)

    def describe(self) -> str:
        return "Replace the outbox's head-of-aggregate index with the open-rows index"

    @property
    def migration_name_fragment(self) -> str:
        return "open_rows_index"


class TuneOutboxAutovacuum(VendorDdl):
    """Gives an existing outbox the autovacuum tuning of a queue table that a new one
    gets from its CREATE TABLE (and resets it when reversed); PostgreSQL only."""

    model_name = "outboxevent"

    def statements(self, vendor: str, *, forwards: bool) -> list[str]:
        return autovacuum_statements(vendor, forwards=forwards)

    def describe(self) -> str:
        return "Tune autovacuum for the outbox as a queue table (PostgreSQL)"

    @property
    def migration_name_fragment(self) -> str:
        return "outbox_autovacuum"


class ReplaceRetentionIndex(VendorDdl):
    """Swaps the outbox's unfiltered retention index ``(status, processed_at)`` for one
    filtered on the closed statuses (and back when reversed), so the claim's open-row
    predicates can never be served by it; each step guarded, so it is idempotent.
    MariaDB/MySQL have no filtered indexes: nothing happens there."""

    model_name = "outboxevent"

    def statements(self, vendor: str, *, forwards: bool) -> list[str]:
        return closed_rows_index_statements(vendor, forwards=forwards)

    def describe(self) -> str:
        return "Replace the outbox's retention index with one over closed rows only"

    @property
    def migration_name_fragment(self) -> str:
        return "closed_rows_index"
