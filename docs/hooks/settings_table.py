"""mkdocs hook: the settings reference is rendered from ``eventferry_django.conf.SETTINGS``.

A page that contains the marker below gets it replaced by one section per setting (type,
default, meaning, the check ids it can raise). Nothing about a setting is written by hand
in the docs, so the page cannot drift from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

MARKER = "<!-- settings-table -->"

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _default(value: Any) -> str:
    return f"`{value!r}`"


def check_page(check_id: str) -> str:
    """The page that explains ``check_id`` (``eventferry.E0NN`` or ``W0NN``): the
    publishers' checks (E030-E049, E070-E089) on checks-brokers.md, the others on
    checks.md."""
    number = int(check_id.removeprefix("eventferry.")[1:])
    return "checks-brokers.md" if 30 <= number < 50 or 70 <= number < 90 else "checks.md"


def render() -> str:
    from eventferry_django.conf import SETTINGS

    rows = ["| key | type | default | checks |", "|---|---|---|---|"]
    rows += [
        f"| [`{s.key}`](#{s.key.lower().replace('_', '-')}) | {s.type} | {_default(s.default)} "
        f"| {', '.join(f'[{c[11:]}]({check_page(c)}#{c[11:].lower()})' for c in s.check_ids)} |"
        for s in SETTINGS
    ]
    sections = []
    for s in SETTINGS:
        checks = ", ".join(
            f"[`{c}`]({check_page(c)}#{c[11:].lower()})" for c in s.check_ids
        )
        sections.append(
            f"### `{s.key}` {{#{s.key.lower().replace('_', '-')}}}\n\n"
            f"- **Type:** {s.type}\n"
            f"- **Default:** {_default(s.default)}\n"
            f"- **Checks:** {checks}\n\n"
            f"{s.meaning}\n"
        )
    return "\n".join(rows) + "\n\n" + "\n".join(sections)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, render())
    return markdown
