"""The DDL of each release, frozen: what its migration runs on each vendor is committed
text (``released_sql/<release>/<table>.<vendor>.sql``), not rendered from today's code,
so an edit to the live DDL (``store/schema.py``, ``store/tables.py``) cannot change what
0.1.0's migration ran last year.

Each file holds one table's statements forwards and backwards, rendered once from the
live code for sentinel names (:data:`SENTINEL_TABLE`, :data:`SENTINEL_SCHEMA`) when the
release was frozen, with the sentinels turned into placeholders:

``{{table}}``
    the table's name (the outbox's or the inbox's; the relay registry and the task
    results are ``{{table}}_relays`` and ``{{table}}_task_results`` beside the outbox);
    every object name derived from it (``PK_{{table}}``, ``IX_{{table}}_claim_ready``)
    is spelled with it too;
``{{schema_prefix}}``
    the schema, quoted as the vendor quotes it, and a dot; nothing without a schema;
``{{schema_literal}}``
    the schema as a string literal; ``DATABASE()`` without one (MariaDB/MySQL's
    ``information_schema`` guards).

At migrate time they are filled from the validated ``TABLE``, ``INBOX_TABLE`` and
``SCHEMA`` settings (:class:`~.naming.TableName` admits letters, digits and underscores
only, so a name cannot end a quoted identifier or a literal). A vendor whose DDL depends
on ``NATIVE_JSON`` (SQL Server) has a ``.native_json`` file beside the default one where
it differs. A later release gets a directory of its own (see ``docs/development.md``);
these files are never edited.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from .naming import QUOTES, TableName

#: The table name the templates are rendered for, then replaced by ``{{table}}``.
SENTINEL_TABLE = "eventferry_frozen_table"
#: The schema name the templates are rendered for, then replaced by the schema
#: placeholders.
SENTINEL_SCHEMA = "eventferry_frozen_schema"

#: The lines that open a direction and a statement in a template file.
FORWARDS = "-- [forwards]"
BACKWARDS = "-- [backwards]"
STATEMENT = "-- [statement]"

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
_DIRECTORY = "released_sql"


@dataclass(frozen=True)
class ReleasedDdl:
    """One release's statements for one table on one vendor, with placeholders."""

    forwards: tuple[str, ...]
    backwards: tuple[str, ...]


def identifiers(vendor: str, name: TableName) -> dict[str, str]:
    """The placeholders' values for table ``name`` on ``vendor`` (its default schema
    filled in: SQL Server's ``dbo``)."""
    name = name.for_vendor(vendor)
    opening, closing = QUOTES[vendor]
    return {
        "table": name.table,
        "schema_prefix": f"{opening}{name.schema}{closing}." if name.schema else "",
        "schema_literal": f"'{name.schema}'" if name.schema else "DATABASE()",
    }


def fill(template: str, values: dict[str, str]) -> str:
    """``template`` with every placeholder replaced by its value, in one pass (a value
    is never read as a placeholder); an unknown placeholder is an error."""
    return _PLACEHOLDER.sub(lambda match: values[match[1]], template)


def file_name(table: str, vendor: str, *, native_json: bool = False) -> str:
    """The file of ``table``'s DDL on ``vendor`` in a release's directory."""
    return f"{table}.{vendor}{'.native_json' if native_json else ''}.sql"


def release_directory(release: str) -> Traversable:
    """Where ``release``'s files are, in the installed package."""
    return resources.files(__package__).joinpath(_DIRECTORY, release)


@functools.cache
def load(release: str, table: str, vendor: str, *, native_json: bool = False) -> ReleasedDdl:
    """The released statements of ``release`` for ``table`` on ``vendor``: the
    ``.native_json`` file where ``native_json`` is asked for and the vendor has one,
    else the default."""
    directory = release_directory(release)
    path = directory.joinpath(file_name(table, vendor, native_json=native_json))
    if native_json and not path.is_file():
        path = directory.joinpath(file_name(table, vendor))
    return parse(path.read_text(encoding="utf-8"))


def released_statements(
    release: str, table: str, vendor: str, name: TableName, *, forwards: bool = True,
    native_json: bool = False,
) -> list[str]:
    """What ``release`` runs for ``table``, named ``name``, on ``vendor``, forwards or
    backwards."""
    released = load(release, table, vendor, native_json=native_json)
    values = identifiers(vendor, name)
    return [fill(statement, values)
            for statement in (released.forwards if forwards else released.backwards)]


# -- the files' format ------------------------------------------------------------------
def parse(text: str) -> ReleasedDdl:
    """A template file's statements: after its header comments, :data:`FORWARDS` and
    :data:`BACKWARDS` each open a list of statements, each opened by :data:`STATEMENT`."""
    blocks: dict[str, list[list[str]]] = {}
    current: list[list[str]] | None = None
    for line in text.splitlines():
        if line in (FORWARDS, BACKWARDS):
            current = blocks.setdefault(line, [])
        elif line == STATEMENT and current is not None:
            current.append([])
        elif current is not None:
            current[-1].append(line)
    return ReleasedDdl(
        forwards=tuple("\n".join(lines) for lines in blocks[FORWARDS]),
        backwards=tuple("\n".join(lines) for lines in blocks[BACKWARDS]),
    )


def template(header: str, forwards: Sequence[str], backwards: Sequence[str]) -> str:
    """A template file's text (see :func:`parse`) for statements rendered for the
    sentinel names, the sentinels turned into placeholders."""
    lines = [f"-- {line}" if line else "--" for line in header.splitlines()]
    for marker, statements in ((FORWARDS, forwards), (BACKWARDS, backwards)):
        lines.append(marker)
        for statement in statements:
            lines += [STATEMENT, placeholders(statement)]
    return "\n".join(lines) + "\n"


def placeholders(statement: str) -> str:
    """``statement``, rendered for the sentinel names, with the sentinels turned into
    placeholders; refuses SQL that would not come back the same (a placeholder's
    spelling already in it, a marker line, a sentinel left over)."""
    if _PLACEHOLDER.search(statement) or {FORWARDS, BACKWARDS, STATEMENT} & set(
            statement.splitlines()) or statement != statement.strip("\n"):
        raise ValueError(f"cannot freeze this statement faithfully:\n{statement}")
    for quote_open, quote_close in set(QUOTES.values()):
        statement = statement.replace(f"{quote_open}{SENTINEL_SCHEMA}{quote_close}.",
                                      "{{schema_prefix}}")
    statement = statement.replace(f"'{SENTINEL_SCHEMA}'", "{{schema_literal}}")
    statement = statement.replace(SENTINEL_TABLE, "{{table}}")
    if SENTINEL_SCHEMA in statement:
        raise ValueError(f"the schema appears where no placeholder can stand:\n{statement}")
    return statement
