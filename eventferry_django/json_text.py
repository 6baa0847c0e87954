"""A JSON model field that stores JSON text: the task results' JSON columns.

Django's ``JSONField`` asks the connection whether the server supports JSON
(``features.supports_json_field``) and fails the system checks (``fields.E180``) where the
answer is no. mssql-django answers from the version the server reports, and says no for
any it maps below 2016 (the T-SQL endpoint reports 12.0, SQL Server 2014's), so
``migrate`` and ``check --database`` of every project that installs eventferry stopped
there, whether it used tasks or not.

These columns never needed the server's JSON support: release 0.1.0's DDL made them
NVARCHAR(MAX) with ``ISJSON`` checks on SQL Server (``JSON`` with ``NATIVE_JSON``), JSONB
on PostgreSQL, JSON on MySQL (LONGTEXT with ``JSON_VALID`` on MariaDB), TEXT with
``json_valid`` checks on SQLite. :class:`JsonTextField` writes JSON text into whichever it
is (PostgreSQL and MySQL convert the text on the way in) and decodes the text it reads
back, whatever the server says about JSON.

What it keeps of ``JSONField``: Python ``None`` is SQL NULL, JSON ``null`` reads back as
``None``, and dumped data holds the value itself. What it leaves out: key lookups and
containment (``arguments__kwargs``); nothing queries into these columns.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django import forms
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper

from .task_messages import NotJson

if TYPE_CHECKING:
    _Field = models.Field[Any, Any]
else:
    _Field = models.Field


class JsonTextField(_Field):
    """JSON stored as text in the column the released DDL made; see the module doc."""

    # As JSONField: no value means NULL (None), never the empty string.
    empty_strings_allowed = False
    description = "JSON stored as text"

    def get_internal_type(self) -> str:
        return "TextField"

    def db_type(self, connection: BaseDatabaseWrapper) -> str | None:
        # The type Django gives a JSONField on this vendor, the column's own (NVARCHAR(MAX),
        # jsonb, json, text): a cast to this field (bulk_update's CASE on PostgreSQL) then
        # lands in the column as it is.
        json_type = connection.data_types.get("JSONField")
        return str(json_type) if json_type else super().db_type(connection)

    def get_prep_value(self, value: Any) -> str | None:
        value = super().get_prep_value(value)
        if value is None:
            return None
        try:
            return json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise NotJson(
                f"{self} cannot store {value!r:.80}: {exc}. Store what JSON holds: dicts "
                "with string keys, lists, str, int, finite floats, bool and None."
            ) from exc

    def from_db_value(self, value: Any, expression: Any, connection: BaseDatabaseWrapper) -> Any:
        if not isinstance(value, str | bytes | bytearray):
            return value  # NULL, or a driver that decoded the JSON itself
        try:
            return json.loads(value)
        except ValueError as exc:
            raise NotJson(f"{self} holds {value!r:.80}, which is not JSON: {exc}") from exc

    def value_to_string(self, obj: models.Model) -> Any:
        # As JSONField: the serialisers write the value itself, not its text.
        return self.value_from_object(obj)

    def formfield(self, **kwargs: Any) -> Any:
        return super().formfield(**{"form_class": forms.JSONField, **kwargs})
