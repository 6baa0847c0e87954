"""Migration operations that create eventferry's tables with hand-written vendor DDL.

They carry no model state: each migration wraps one in ``SeparateDatabaseAndState`` next
to a ``CreateModel``, so Django keeps tracking the model and ``makemigrations --check``
still catches drift between the model and the migrations.

Each runs the frozen DDL of its release (:mod:`.released_ddl`), filled with the table
names the settings give: nothing here renders DDL from today's code.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.operations.base import Operation
from django.db.migrations.state import ProjectState

from .ddl import TableKind, released, table_ddl
from .store.tables import BUCKET, SCHEMA_VERSION, Column


class VendorDdl(Operation):
    """Runs hand-written vendor DDL on a database the router lets the model migrate to.
    Subclasses name the model whose router decision applies and the released migration
    whose frozen DDL they run (a key of :data:`~.ddl.RELEASES`)."""

    reversible = True
    reduces_to_sql = True
    model_name: ClassVar[str]
    release: ClassVar[str]

    def statements(self, vendor: str, *, forwards: bool) -> list[str]:
        """The DDL to run on ``vendor``, forwards or backwards."""
        return released(self.release, vendor, forwards=forwards)

    def needed(self, schema_editor: BaseDatabaseSchemaEditor, *, forwards: bool) -> bool:
        """Whether to run the statements at all; always, since they guard themselves,
        except where the vendor's SQL cannot (see :class:`AddSchemaVersionColumn`)."""
        return True

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
        if not self.needed(schema_editor, forwards=forwards):
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

    def describe(self) -> str:
        return f"Create the {self.table} table and its indexes with vendor DDL"

    @property
    def migration_name_fragment(self) -> str:
        return f"create_{self.table}_table"


class CreateOutboxTable(CreateTable):
    table = "outbox"
    model_name = "outboxevent"
    release = "0001_initial"


class CreateInboxTable(CreateTable):
    table = "inbox"
    model_name = "inboxmessage"
    release = "0004_inbox"


class CreateRelayRegistry(CreateTable):
    """The relay registry beside the outbox, on the outbox's database (no model: only
    the relays read and write it)."""

    table = "relays"
    model_name = "outboxevent"
    release = "0009_relay_registry"

    def describe(self) -> str:
        return "Create the relay registry beside the outbox with vendor DDL"

    @property
    def migration_name_fragment(self) -> str:
        return "relay_registry"


class ReplaceAggregateIndex(VendorDdl):
    """Swaps the outbox's first-release head-of-aggregate index for the open-rows index
    (and back when reversed); each step guarded, so it is idempotent."""

    model_name = "outboxevent"
    release = "0005_open_rows_index"

    def describe(self) -> str:
        return "Replace the outbox's head-of-aggregate index with the open-rows index"

    @property
    def migration_name_fragment(self) -> str:
        return "open_rows_index"


class TuneOutboxAutovacuum(VendorDdl):
    """Gives an existing outbox the autovacuum tuning of a queue table that a new one
    gets from its CREATE TABLE (and resets it when reversed); PostgreSQL only."""

    model_name = "outboxevent"
    release = "0006_outbox_autovacuum"

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
    release = "0007_closed_rows_index"

    def describe(self) -> str:
        return "Replace the outbox's retention index with one over closed rows only"

    @property
    def migration_name_fragment(self) -> str:
        return "closed_rows_index"


class AddOutboxColumn(VendorDdl):
    """Adds a nullable column to the outbox (and drops it when reversed); guarded in the
    SQL of every vendor but SQLite, whose ALTER TABLE has no IF [NOT] EXISTS for columns:
    there the table's columns are read first. The model's field is added beside it by the
    migration's state operation. Subclasses name the column and the release."""

    model_name = "outboxevent"
    column: ClassVar[Column]

    def needed(self, schema_editor: BaseDatabaseSchemaEditor, *, forwards: bool) -> bool:
        connection = schema_editor.connection
        dialect, table = table_ddl(connection.vendor)
        if dialect.schema.guards_columns or schema_editor.collect_sql:  # sqlmigrate prints
            return True
        with connection.cursor() as cursor:
            cursor.execute(dialect.schema.column_count_sql(self.column, table))
            (present,) = cursor.fetchone()
        return bool(present) is not forwards


class AddSchemaVersionColumn(AddOutboxColumn):
    """The outbox's nullable ``schema_version`` column (migration 0008)."""

    column = SCHEMA_VERSION
    release = "0008_schema_version"

    def describe(self) -> str:
        return "Add the outbox's schema_version column with vendor DDL"

    @property
    def migration_name_fragment(self) -> str:
        return "schema_version"


class AddClaimBuckets(AddOutboxColumn):
    """The outbox's nullable ``bucket`` column and the index of each bucket's fresh rows
    (migration 0010; the column alone on SQLite), by which relays share the work."""

    column = BUCKET
    release = "0010_claim_buckets"

    def describe(self) -> str:
        return "Add the outbox's bucket column and bucket index with vendor DDL"

    @property
    def migration_name_fragment(self) -> str:
        return "claim_buckets"
