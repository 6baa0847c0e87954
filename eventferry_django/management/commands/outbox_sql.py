"""``manage.py outbox_sql``: print the outbox (or inbox, relay registry, task results,
bucket leases, batches in flight) DDL for review, touching no database."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import connections

from ...conf import get_settings
from ...ddl import RELEASES, TableKind, released, releases_of, table_ddl
from ...exceptions import EventferryError
from ...naming import has_schemas
from ...store import VENDORS
from ._base import EventferryCommand

#: The flags that print another table than the outbox, and the table each prints.
OTHER_TABLES: dict[str, TableKind] = {
    "inbox": "inbox", "relay_registry": "relays", "task_results": "task_results",
    "buckets": "buckets", "in_flight": "in_flight",
}


class Command(EventferryCommand):
    help = (
        "Print the exact DDL that `migrate` runs for the outbox table (or, with --inbox, "
        "--relay-registry, --task-results, --buckets or --in-flight, for that table), "
        "without connecting to a database (for DBAs who review schema changes). Defaults "
        "come from EVENTFERRY and the vendor of its DATABASE."
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
                            help="Print the inbox table's DDL instead.")
        parser.add_argument("--relay-registry", action="store_true",
                            help="Print the relay registry's DDL (--table names its "
                            "outbox) instead.")
        parser.add_argument("--task-results", action="store_true",
                            help="Print the Django tasks' results table's DDL (--table "
                            "names its outbox) instead.")
        parser.add_argument("--buckets", action="store_true",
                            help="Print the bucket leases' DDL (--table names its outbox) "
                            "instead.")
        parser.add_argument("--in-flight", action="store_true",
                            help="Print the DDL of the batches in flight (--table names its "
                            "outbox) instead.")
        parser.add_argument(
            "--native-json", action="store_true", default=None,
            help="SQL Server 2025: use the native json type instead of NVARCHAR(MAX) + ISJSON "
            "(default: EVENTFERRY['NATIVE_JSON']).",
        )
        parser.add_argument("--release", choices=list(RELEASES),
                            help="Print only this release's DDL (default: every release's "
                            "for the table, oldest first: what migrating from scratch runs).")
        parser.add_argument("--reverse", action="store_true",
                            help="Print the DDL that unapplies the migration instead "
                            "(every release's, newest first).")
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
        flags = [flag for flag in OTHER_TABLES if options[flag]]
        if len(flags) > 1:
            raise CommandError(f"{' and '.join(_flag(f) for f in flags)} "
                               "print different tables; pick one.")
        kind: TableKind = OTHER_TABLES[flags[0]] if flags else "outbox"
        if kind not in ("outbox", "inbox") and options["optimize_sequential_key"]:
            raise CommandError(f"{_flag(flags[0])} prints its own table; "
                               "--optimize-sequential-key concerns the outbox and the inbox.")
        try:
            dialect, table = table_ddl(
                vendor, kind, schema=options["schema"],
                table=options["table"], native_json=options["native_json"],
            )
        except EventferryError as exc:
            raise CommandError(str(exc)) from exc
        forwards = not options["reverse"]
        if options["optimize_sequential_key"]:
            # Not a migration's: for a DBA to run where contention shows.
            if vendor != "microsoft":
                raise CommandError("--optimize-sequential-key is SQL Server's; "
                                   f"{vendor} has no such option.")
            statements = dialect.schema.sequential_key_statements(table, on=forwards)
        else:
            releases = [options["release"]] if options["release"] else releases_of(kind)
            if not forwards:
                releases.reverse()
            try:
                statements = [statement for release in releases for statement in released(
                    release, kind, vendor, forwards=forwards, schema=options["schema"],
                    table=options["table"], native_json=options["native_json"])]
            except ValueError as exc:  # a release without DDL for this table
                raise CommandError(str(exc)) from exc
        for statement in statements:
            self.stdout.write(statement if statement.endswith(";") else statement + ";")

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


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")
