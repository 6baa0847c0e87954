"""System checks: ``manage.py check`` (and every ``runserver``/``migrate``) validates
``EVENTFERRY`` and the publisher before anything runs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.conf import settings as django_settings
from django.core.checks import CheckMessage, Error, register
from django.db import connections, router
from django.db.models import Model
from django.utils.module_loading import import_string

from .conf import SETTING_NAME, SETTINGS, EventferrySettings, parse
from .exceptions import ConfigurationError
from .history.session import missing_jars
from .naming import has_schemas
from .publishers.base import Publisher
from .store import VENDORS, dialect_for
from .store.tables import Table

#: Check ids by setting key (from the settings table); "" is a setting that is not a dict.
CHECK_IDS = {"": "eventferry.E001", **{setting.key: setting.check_id for setting in SETTINGS}}
UNKNOWN_KEY_ID = "eventferry.E002"
#: The tag of eventferry's checks: ``manage.py check --tag eventferry``.
TAG = "eventferry"


@register(TAG)
def check_settings(**kwargs: Any) -> list[CheckMessage]:
    parsed, problems = parse(getattr(django_settings, SETTING_NAME, None))
    messages: list[CheckMessage] = [
        Error(p.message, hint=p.hint, id=CHECK_IDS.get(p.key, UNKNOWN_KEY_ID))
        for p in problems
    ]
    messages += _check_database(parsed)
    messages += _check_publisher(parsed)
    messages += _check_spark_jars(parsed)
    return messages


def _check_spark_jars(parsed: EventferrySettings) -> list[CheckMessage]:
    missing = missing_jars(parsed.spark.jars or ())
    if not missing:
        return []
    return [Error(
        f"{SETTING_NAME}['SPARK']['JARS'] names {', '.join(missing)}, which does not exist.",
        hint="Give the path of the JDBC driver's jar, or leave JARS unset to use the one "
        "Debian packages (e.g. /usr/share/java/postgresql.jar from libpostgresql-jdbc-java).",
        id="eventferry.E061",
    )]


def _check_database(parsed: EventferrySettings) -> list[CheckMessage]:
    if parsed.database not in django_settings.DATABASES:
        return [Error(
            f"{SETTING_NAME}['DATABASE'] is {parsed.database!r}, which is not in DATABASES.",
            hint=f"Use one of: {', '.join(django_settings.DATABASES)}.",
            id="eventferry.E010",
        )]
    vendor = connections[parsed.database].vendor
    if vendor not in VENDORS:
        return [Error(
            f"Database {parsed.database!r} uses the {vendor!r} backend, which eventferry "
            "does not support.",
            hint=f"Supported vendors: {', '.join(VENDORS)}.",
            id="eventferry.E012",
        )]
    messages: list[CheckMessage] = []
    dialect = dialect_for(vendor, parsed.table_name)
    schema = dialect.schema
    # The migrations create the relay registry, the task results, the bucket leases and
    # the batches in flight beside the outbox, named after it and longer: their names
    # are the TABLE setting's too.
    try:
        beside: tuple[Table, ...] = (schema.registry, schema.task_results,
                                     schema.bucket_leases, schema.in_flight)
    except ConfigurationError as exc:
        messages.append(Error(
            f"{SETTING_NAME}['TABLE'] {parsed.table!r} is too long for the tables named "
            f"after it: {exc}",
            hint="Choose a shorter table name; the tables the migrations create beside "
                 "the outbox add a suffix to it.",
            id="eventferry.E013",
        ))
        beside = ()
    # Release 0.2.0 adds a constraint to the outbox by ALTER TABLE, so the outbox's
    # shape (its CREATE TABLE, 0.1.0's) does not list it.
    outbox = schema.outbox
    migrated = replace(outbox, checks=(*outbox.checks, schema.claimed_needs_0_2(outbox)))
    for key, tables in (("TABLE", (migrated, *beside)),
                        ("INBOX_TABLE", (schema.inbox(parsed.inbox_table_name),))):
        too_long = [name for table in tables for name in table.too_long_for(vendor)]
        if too_long:
            messages.append(Error(
                f"{SETTING_NAME}[{key!r}] {tables[0].name.table!r} is too long for {vendor}: it "
                f"would truncate {', '.join(too_long)}.",
                hint="Choose a shorter table name; index and constraint names embed it.",
                id="eventferry.E013",
            ))
    if parsed.inbox_table == parsed.table:
        messages.append(Error(
            f"{SETTING_NAME}['INBOX_TABLE'] and {SETTING_NAME}['TABLE'] are both "
            f"{parsed.table!r}: the inbox and the outbox cannot share a table.",
            hint="Give INBOX_TABLE a name of its own (default 'inbox').",
            id="eventferry.E050",
        ))
    if parsed.schema is not None and not has_schemas(vendor):
        messages.append(Error(
            f"{SETTING_NAME}['SCHEMA'] is {parsed.schema!r}, but SQLite has no schemas.",
            hint="Leave SCHEMA unset on SQLite.",
            id="eventferry.E014",
        ))
    return messages + _check_routers(parsed.database)


def _check_routers(alias: str) -> list[CheckMessage]:
    """The outbox and inbox live on ``EVENTFERRY["DATABASE"]``: a router must neither
    send their writes elsewhere nor keep their tables from being created there."""
    from .models import InboxMessage, OutboxEvent

    messages: list[CheckMessage] = []
    for model in (OutboxEvent, InboxMessage):
        label = model._meta.label
        routed = _routed_write_alias(model)
        if routed is not None and routed != alias:
            messages.append(Error(
                f"A database router sends writes of {label} to {routed!r}, but "
                f"{SETTING_NAME}['DATABASE'] is {alias!r}.",
                hint=f"eventferry reads and writes its tables on {SETTING_NAME}['DATABASE'] "
                f"(and on the alias publish_event(using=...) names). Set DATABASE to "
                f"{routed!r}, or have the router return None for the eventferry_django app.",
                id="eventferry.E051",
            ))
        if not router.allow_migrate_model(alias, model):
            messages.append(Error(
                f"A database router does not allow migrating {label} on {alias!r} "
                f"({SETTING_NAME}['DATABASE']): its table would never be created there.",
                hint="Let allow_migrate() return True for app_label 'eventferry_django' on "
                f"{alias!r}, and on every other alias you publish to or consume on with "
                "using=.",
                id="eventferry.E052",
            ))
    return messages


def _routed_write_alias(model: type[Model]) -> str | None:
    """The alias the first router with an opinion picks for writes of ``model``, or None
    when no router has one (Django then uses "default", which eventferry never relies
    on: it always names its alias)."""
    for candidate in router.routers:
        db_for_write = getattr(candidate, "db_for_write", None)
        chosen = db_for_write(model) if db_for_write is not None else None
        if chosen is not None:
            return str(chosen)
    return None


def _check_publisher(parsed: EventferrySettings) -> list[CheckMessage]:
    backend = parsed.publisher.backend
    try:
        publisher_class = import_string(backend)
    except ImportError as exc:
        return [Error(
            f"{SETTING_NAME}['PUBLISHER']['BACKEND'] {backend!r} cannot be imported: {exc}",
            hint="Give the dotted path of a Publisher subclass, e.g. "
            "'eventferry_django.publishers.kombu.KombuPublisher', and install its extra.",
            id="eventferry.E020",
        )]
    if not (isinstance(publisher_class, type) and issubclass(publisher_class, Publisher)):
        return [Error(
            f"{SETTING_NAME}['PUBLISHER']['BACKEND'] {backend!r} is not a subclass of "
            "eventferry_django.publishers.base.Publisher.",
            hint="Point BACKEND at a Publisher subclass, or write one (see the "
            "documentation: Publishing, Publishers).",
            id="eventferry.E021",
        )]
    return publisher_class.check(parsed.publisher.options)
