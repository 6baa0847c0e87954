"""Names of eventferry's tables (the outbox, the inbox) and of the objects that hang
off them.

Schema and table come from settings, so they are validated here before any SQL sees
them; everything else (constraint and index names) is derived from the table name so
that two tables never collide and a DBA can tell which table an index serves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .exceptions import ConfigurationError

IDENTIFIER_PATTERN = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,99}$")

#: Longest identifier each vendor keeps without truncating (SQLite has no limit).
MAX_IDENTIFIER_LENGTH: dict[str, int] = {
    "microsoft": 128,
    "postgresql": 63,
    "mysql": 64,
}

#: How each vendor quotes an identifier: (opening, closing) character.
QUOTES: dict[str, tuple[str, str]] = {
    "microsoft": ("[", "]"),
    "postgresql": ('"', '"'),
    "mysql": ("`", "`"),
    "sqlite": ('"', '"'),
}

#: SQL Server has no "search path": an unqualified name resolves through the login's
#: default schema, which is not dbo for Azure AD and contained users. So it always
#: gets a schema; the other vendors use their own default unless one is configured.
DEFAULT_SCHEMA: dict[str, str | None] = {"microsoft": "dbo"}


def has_schemas(vendor: str) -> bool:
    """Whether ``vendor`` can qualify a table with a schema (SQLite cannot)."""
    return vendor != "sqlite"


def validate_identifier(value: object, what: str) -> str:
    """Return ``value`` if it is a safe SQL identifier, else raise ``ConfigurationError``."""
    if not isinstance(value, str) or not IDENTIFIER_PATTERN.match(value):
        raise ConfigurationError(
            f"{what} {value!r} is not a valid identifier: it must match "
            f"{IDENTIFIER_PATTERN.pattern} (a letter or underscore, then up to 99 letters, "
            "digits or underscores)."
        )
    return value


@dataclass(frozen=True)
class TableName:
    """A validated ``schema.table`` pair and the object names derived from it."""

    table: str
    schema: str | None = None
    #: Which table this names, for error messages: "Outbox" or "Inbox".
    role: str = field(default="Outbox", compare=False)

    def __post_init__(self) -> None:
        validate_identifier(self.table, f"{self.role} table name")
        if self.schema is not None:
            validate_identifier(self.schema, f"{self.role} schema name")

    def for_vendor(self, vendor: str) -> TableName:
        """This name with the vendor's default schema filled in where it needs one."""
        if self.schema is not None:
            return self
        return TableName(self.table, DEFAULT_SCHEMA.get(vendor), self.role)

    # Derived object names. They are part of the released schema: never rename one.
    @property
    def primary_key(self) -> str:
        return f"PK_{self.table}"

    @property
    def message_id_unique(self) -> str:
        return f"UQ_{self.table}_message_id"

    def json_check(self, column: str) -> str:
        return f"CK_{self.table}_{column}_json"

    @property
    def payload_check(self) -> str:
        return self.json_check("payload")

    @property
    def headers_check(self) -> str:
        return self.json_check("headers")

    @property
    def status_check(self) -> str:
        return f"CK_{self.table}_status"

    @property
    def claimed_check(self) -> str:
        return f"CK_{self.table}_claimed_at"

    @property
    def claimed_needs_0_2_check(self) -> str:
        """The constraint (SQLite: the triggers) refusing status 1 from release 0.2.0 on:
        only a 0.1.0 relay still writes it, and its every claim fails with this name."""
        return f"CK_{self.table}_claimed_needs_0_2"

    def default_constraint(self, column: str) -> str:
        """SQL Server names its DEFAULT constraints; unnamed ones get random names."""
        return f"DF_{self.table}_{column}"

    @property
    def aggregate_index(self) -> str:
        """The open-rows index: the head-of-aggregate probe and the chain walk."""
        return f"IX_{self.table}_agg_open"

    @property
    def claim_index(self) -> str:
        return f"IX_{self.table}_claim_ready"

    @property
    def bucket_index(self) -> str:
        """Each bucket's fresh rows: the claim's reading of its buckets."""
        return f"IX_{self.table}_bucket_fresh"

    @property
    def retention_index(self) -> str:
        """The retention index on every status, where the vendor has no filtered indexes
        (or does not plan with them well); :attr:`closed_index` elsewhere."""
        return f"IX_{self.table}_done_processed_at"

    @property
    def closed_index(self) -> str:
        """The retention index over closed rows only; its name is no
        longer than :attr:`retention_index`'s, so no table name valid for one is too long
        for the other."""
        return f"IX_{self.table}_closed_rows"

    @property
    def relay_registry(self) -> TableName:
        """The table beside this outbox where its live relays check in."""
        return TableName(f"{self.table}_relays", self.schema, role="Relay registry")

    @property
    def bucket_leases(self) -> TableName:
        """The table beside this outbox that says which relay holds each bucket, under
        which epoch, until when."""
        return TableName(f"{self.table}_buckets", self.schema, role="Bucket leases")

    @property
    def in_flight(self) -> TableName:
        """The table beside this outbox that lists each relay's batches in flight."""
        return TableName(f"{self.table}_in_flight", self.schema, role="Batches in flight")

    @property
    def task_results(self) -> TableName:
        """The table beside this outbox where the Django tasks enqueued through it record
        their results."""
        return TableName(f"{self.table}_task_results", self.schema, role="Task results")

    @property
    def notify_channel(self) -> str:
        """The PostgreSQL NOTIFY channel that wakes relays of this table."""
        return f"eventferry_{self.table}"

    def quoted(self, vendor: str) -> str:
        """The fully qualified, quoted name for use in SQL on ``vendor``."""
        opening, closing = QUOTES[vendor]
        name = self.for_vendor(vendor)
        table = f"{opening}{name.table}{closing}"
        if name.schema is None:
            return table
        return f"{opening}{name.schema}{closing}.{table}"

    def orm_db_table(self, vendor: str) -> str:
        """The model's ``db_table``: the backend's ``quote_name`` adds the outer quotes.

        ``quote_name`` leaves an already-quoted name alone, so ``schema].[table`` becomes
        ``[schema].[table]`` and every ORM query is schema-qualified like our own SQL.
        """
        return self.quoted(vendor)[1:-1]
