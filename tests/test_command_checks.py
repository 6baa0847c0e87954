"""Every eventferry command run as from a shell with a broken ``EVENTFERRY``: the system
check report with its hints, never a traceback; ``--help`` still helps, then reports.

The commands are found, not listed, so a new command is held to this too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import find_commands, load_command_class
from django.test import override_settings

import eventferry_django.management
from eventferry_django.management.commands._base import EventferryCommand

COMMANDS = sorted(find_commands(str(Path(eventferry_django.management.__file__).parent)))
#: What a command needs to get past argparse to its system checks.
REQUIRED_ARGUMENTS = {
    "outbox_purge": ["--older-than", "7d"],
    "outbox_archive": ["--to", "/nonexistent/archive"],
    "outbox_replay": ["--from", "/nonexistent/archive"],
    "outbox_erase": ["--from", "/nonexistent/archive", "--aggregate-id", "42"],
    "outbox_report": ["--from", "/nonexistent/archive", "--out", "/nonexistent/report"],
}
BROKEN = {"BATCH_SIZE": 0, "BACKOFF": {"BASE": -1}}
REPORT = [
    "SystemCheckError: System check identified some issues:",
    "(eventferry.E005) EVENTFERRY['BATCH_SIZE'] is 0; it must be a whole number 1..10,000.",
    "HINT: Use 1..10,000.",
    "(eventferry.E007) EVENTFERRY['BACKOFF'] BASE is -1; it must be seconds above 0.",
]


def run_from_shell(command: str, *args: str, capsys: pytest.CaptureFixture[str]
                   ) -> tuple[int, str, str]:
    """``manage.py <command> <args>`` in this process: exit status, stdout, stderr."""
    with override_settings(EVENTFERRY=BROKEN), pytest.raises(SystemExit) as exited:
        load_command_class("eventferry_django", command).run_from_argv(
            ["manage.py", command, *args])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_every_command_is_an_eventferry_command() -> None:
    assert {"outbox_archive", "outbox_purge", "outbox_redrive", "outbox_relay",
            "outbox_replay", "outbox_report", "outbox_sql", "outbox_status"} <= set(COMMANDS)
    for command in COMMANDS:
        assert isinstance(load_command_class("eventferry_django", command),
                          EventferryCommand), command


@pytest.mark.parametrize("command", COMMANDS)
def test_a_broken_setting_gets_the_check_report(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_from_shell(command, *REQUIRED_ARGUMENTS.get(command, []),
                                    capsys=capsys)
    assert code == 1, err
    for line in REPORT:
        assert line in err
    assert "Traceback" not in err + out


@pytest.mark.parametrize("command", COMMANDS)
def test_help_helps_then_reports_a_broken_setting(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_from_shell(command, "--help", capsys=capsys)
    assert code == 0
    assert out.startswith(f"usage: manage.py {command}") and "-h, --help" in out
    for line in REPORT:
        assert line in err
    assert err.rstrip().endswith("This command runs once these are fixed.")


@pytest.mark.parametrize("command", COMMANDS)
def test_help_with_a_sound_setting_reports_nothing(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        load_command_class("eventferry_django", command).run_from_argv(
            ["manage.py", command, "--help"])
    out, err = capsys.readouterr()
    assert exited.value.code == 0 and out.startswith("usage:") and err == ""


@pytest.mark.slow
@pytest.mark.parametrize("args", [[], ["--help"]])
def test_outbox_relay_in_a_real_process(args: list[str]) -> None:
    """The case a new user hit: ``manage.py outbox_relay`` from a shell."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "EVENTFERRY_TEST_SETTINGS": json.dumps(BROKEN)}
    result = subprocess.run(
        [sys.executable, "-m", "django", "outbox_relay", *args],
        cwd=Path(__file__).resolve().parent.parent, env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )
    assert result.returncode == (0 if args else 1), result.stderr
    for line in REPORT:
        assert line in result.stderr
    assert "Traceback" not in result.stderr
