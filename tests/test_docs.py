"""The documentation keeps up with the code: every check id and every exit code a command
can end with is explained on the troubleshooting page, the settings page is generated
from the settings table (mkdocs builds it with ``make docs``), and ``make docs`` fails on
a link to a missing page or anchor."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eventferry_django.conf import SETTINGS
from eventferry_django.history import errors

ROOT = Path(__file__).resolve().parent.parent
TROUBLESHOOTING = (ROOT / "docs" / "troubleshooting.md").read_text(encoding="utf-8")
COMMANDS = sorted(path.stem for path in
                  (ROOT / "eventferry_django" / "management" / "commands").glob("*.py")
                  if not path.stem.startswith("_"))


def section(text: str, heading: str) -> str:
    """The text under a ``## heading``, up to the next heading of that level."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match, f"no '## {heading}' section"
    return match.group(1)


def check_ids_in_code() -> set[str]:
    return {found for path in (ROOT / "eventferry_django").rglob("*.py")
            for found in re.findall(r"eventferry\.[EW]\d{3}", path.read_text(encoding="utf-8"))}


@pytest.mark.parametrize("check_id", sorted(check_ids_in_code()))
def test_every_check_id_has_its_own_entry_on_the_page_the_settings_link(check_id: str) -> None:
    page = (ROOT / "docs" / check_page(check_id)).read_text(encoding="utf-8")
    assert f"\n### {check_id.removeprefix('eventferry.')}\n" in section(page, "System checks")


def exit_codes() -> set[int]:
    """0 done, 1 CommandError (Django's default), 2 argparse, and every code the history
    commands define."""
    return {0, 1, 2} | {value for name, value in vars(errors).items()
                        if name.startswith("EXIT_") and isinstance(value, int)}


@pytest.mark.parametrize("code", sorted(exit_codes()))
def test_every_exit_code_has_a_row(code: int) -> None:
    assert re.search(rf"^\| `{code}` \|", section(TROUBLESHOOTING, "Exit codes"), re.M)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_is_in_the_exit_code_table(command: str) -> None:
    assert f"`{command}`" in section(TROUBLESHOOTING, "Exit codes")


def settings_hook() -> Any:
    """docs/hooks/settings_table.py, which mkdocs loads by path."""
    spec = importlib.util.spec_from_file_location(
        "settings_table", ROOT / "docs" / "hooks" / "settings_table.py")
    assert spec and spec.loader
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook


def check_page(check_id: str) -> str:
    return str(settings_hook().check_page(check_id))


def test_the_settings_page_is_generated_with_every_key() -> None:
    hook = settings_hook()
    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert hook.MARKER in page
    rendered = hook.on_page_markdown(page)
    for setting in SETTINGS:
        assert f"### `{setting.key}`" in rendered
        assert all(check_id in rendered for check_id in setting.check_ids)


#: What ``make docs`` reads besides docs/: linked, not copied, so only the pages change.
DOCS_INPUTS = ("Makefile", "pyproject.toml", "mkdocs.yml", "CHANGELOG.md", "eventferry_django",
               "tests")


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                    reason="mkdocs is not installed (the docs extra)")
@pytest.mark.parametrize("link", ["[gone](no-such-page.md)",
                                  "[gone](relay.md#no-such-section)"],
                         ids=["page", "anchor"])
def test_make_docs_fails_on_a_broken_link(tmp_path: Path, link: str) -> None:
    """``make docs`` itself, on a copy of the pages with one broken link added: a flag that
    drops warnings before ``--strict`` counts them (``--quiet`` did) would let it pass."""
    for name in DOCS_INPUTS:
        (tmp_path / name).symlink_to(ROOT / name)
    # The Makefile's .venv: this interpreter's, already installed (-o: never remade here).
    (tmp_path / ".venv").symlink_to(Path(sys.prefix))
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    built = subprocess.run(["make", "-s", "-o", ".venv/.installed", "docs"], cwd=tmp_path, capture_output=True,
                           text=True, env={**os.environ, "PYTHON": sys.executable})
    assert built.returncode == 0, built.stdout + built.stderr

    index = tmp_path / "docs" / "index.md"
    index.write_text(index.read_text(encoding="utf-8") + f"\nSee {link}.\n", encoding="utf-8")
    broken = subprocess.run(["make", "-s", "-o", ".venv/.installed", "docs"], cwd=tmp_path, capture_output=True,
                            text=True, env={**os.environ, "PYTHON": sys.executable})
    assert broken.returncode != 0
    assert link.split("(")[1].rstrip(")") in broken.stdout + broken.stderr
