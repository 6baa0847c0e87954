"""``manage.py outbox_sql``: print the outbox (or inbox) DDL for review, touching no
database."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import connections

from ...conf import get_settings
from ...ddl import CREATED_BY, TableKind, released, table_ddl
from ...exceptions import EventferryError
from ...naming import has_schemas
from ...store import VENDORS
from ._base import EventferryCommand


class Command(EventferryCommand):
    help = (
        "Print the exact DDL that `migrate` runs for the outbox table (with --inbox: the "
        "inbox table), without connecting to a database (for DBAs who review schema "
        "changes). Defaults come from EVENTFERRY and the vendor of its DATABASE."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--vendor", choices=VENDORS,
            help="Database vendor to print for (default: the vendor of EVENTFERRY['DATABASE'], "
            "or of --database).",
        )
        parser.add_argument("--database", help="Alias whose vendor to use (default: "
                            "EVENTFERRY['DATABASE']).")
        parser.add_argument("--schema", help="Schema (default: EVENTFERRY['SCHEMA']; "
                            "'dbo' on SQL Server).")
        parser.add_argument("--table", help="Table name (default: EVENTFERRY['TABLE'], or "
                            "with --inbox EVENTFERRY['INBOX_TABLE']).")
        parser.add_argument("--inbox", action="store_true",
                            help="Print the inbox table's DDL (migration 0004) instead.")
        parser.add_argument("--relay-registry", action="store_true",
                            help="Print the relay registry's DDL (migration 0009; --table "
                            "names its outbox) instead.")
        parser.add_argument(
            "--native-json", action="store_true", default=None,
            help="SQL Server 2025: use the native json type instead of NVARCHAR(MAX) + ISJSON "
            "(default: EVENTFERRY['NATIVE_JSON']).",
        )
        parser.add_argument("--open-rows-index", action="store_true",
                            help="Print migration 0005's DDL (an existing outbox's "
                            "head-of-aggregate index swapped for the open-rows index) instead.")
        parser.add_argument("--closed-rows-index", action="store_true",
                            help="Print migration 0007's DDL (an existing outbox's retention "
                            "index swapped for one over closed rows only; nothing on "
                            "MariaDB/MySQL and SQLite) instead.")
        parser.add_argument("--schema-version", action="store_true",
                            help="Print migration 0008's DDL (the outbox's nullable "
                            "schema_version column added) instead.")
        parser.add_argument("--claim-buckets", action="store_true",
                            help="Print migration 0010's DDL (the outbox's nullable bucket "
                            "column and the index of each bucket's fresh rows, by which "
                            "relays share the work) instead.")
        parser.add_argument("--autovacuum", action="store_true",
                            help="PostgreSQL: print migration 0006's DDL (an existing "
                            "outbox's autovacuum tuning as a queue table) instead.")
        parser.add_argument("--reverse", action="store_true",
                            help="Print the DDL that unapplies the migration instead.")
        parser.add_argument(
            "--optimize-sequential-key", action="store_true",
            help="SQL Server: print instead the guarded ALTER INDEX that turns "
            "OPTIMIZE_FOR_SEQUENTIAL_KEY on for the table's primary key (with --reverse: "
            "off), for a DBA to run where last-page insert contention shows; migrate never "
            "runs it.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        vendor = options["vendor"] or self._vendor_of(options["database"])
        schema = options["schema"] if options["schema"] is not None else get_settings().schema
        if schema is not None and not has_schemas(vendor):
            given = (f"--schema {schema!r}" if options["schema"] is not None
                     else f"EVENTFERRY['SCHEMA'] {schema!r}")
            raise CommandError(f"SQLite has no schemas: {given} cannot be used for it "
                               "(the settings check says the same: eventferry.E014).")
        kind: TableKind = ("inbox" if options["inbox"] else "relays"
                           if options["relay_registry"] else "outbox")
        if options["inbox"] and options["relay_registry"]:
            raise CommandError("--inbox and --relay-registry print different tables; pick one.")
        if options["relay_registry"] and any(options[flag] for flag in (
                "open_rows_index", "closed_rows_index", "autovacuum", "schema_version",
                "claim_buckets", "optimize_sequential_key")):
            raise CommandError("--relay-registry prints the registry's table; the index and "
                               "tuning options concern the outbox.")
        try:
            dialect, table = table_ddl(
                vendor, kind, schema=options["schema"],
                table=options["table"], native_json=options["native_json"],
            )
        except EventferryError as exc:
            raise CommandError(str(exc)) from exc
        forwards = not options["reverse"]
        migration = self._index_migration(kind, vendor, options)
        if migration is None and options["optimize_sequential_key"]:
            # Not a migration's: for a DBA to run where contention shows.
            if vendor != "microsoft":
                raise CommandError("--optimize-sequential-key is SQL Server's; "
                                   f"{vendor} has no such option.")
            statements = dialect.schema.sequential_key_statements(table, on=forwards)
        else:
            migration = migration or CREATED_BY[kind]
            statements = released(migration, vendor, forwards=forwards, schema=options["schema"],
                                  table=options["table"], native_json=options["native_json"])
            if options["closed_rows_index"] and not statements:
                self.stderr.write(f"Migration 0007 does nothing on {vendor}: its "
                                  "retention index stays unfiltered (docs/claim-plans.md).")
            if ((options["schema_version"] or options["claim_buckets"])
                    and not dialect.schema.guards_columns):
                self.stderr.write(f"{vendor} cannot guard this ALTER TABLE: run it only "
                                  "where the column is missing (migrate checks first).")
        for statement in statements:
            self.stdout.write(statement if statement.endswith(";") else statement + ";")

    @staticmethod
    def _index_migration(kind: str, vendor: str, options: dict[str, Any]) -> str | None:
        """The later migration whose DDL the options ask for, if any (else the one that
        creates the table: 0001, 0004 or 0009)."""
        swaps = {"open_rows_index": "0005_open_rows_index",
                 "closed_rows_index": "0007_closed_rows_index",
                 "autovacuum": "0006_outbox_autovacuum",
                 "schema_version": "0008_schema_version",
                 "claim_buckets": "0010_claim_buckets"}
        for option, migration in swaps.items():
            if options[option]:
                flag = "--" + option.replace("_", "-")
                if kind == "inbox":
                    raise CommandError(f"{flag} concerns the outbox; drop --inbox.")
                if option == "autovacuum" and vendor != "postgresql":
                    raise CommandError("--autovacuum is PostgreSQL's; migration 0006 does "
                                       f"nothing on {vendor}.")
                return migration
        return None

    def _vendor_of(self, alias: str | None) -> str:
        alias = alias or get_settings().database
        if alias not in connections:
            raise CommandError(f"Unknown database alias {alias!r}.")
        vendor = connections[alias].vendor
        if vendor not in VENDORS:
            raise CommandError(
                f"Database {alias!r} is {vendor!r}; pass --vendor ({', '.join(VENDORS)})."
            )
        return vendor
