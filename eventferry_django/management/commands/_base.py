"""The base class of every eventferry management command."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from django.core.management.base import BaseCommand, CommandParser, SystemCheckError

from ...checks import TAG


class EventferryCommand(BaseCommand):
    """A management command that reports a broken ``EVENTFERRY`` through the system checks.

    Django builds the parser (``add_arguments``) before it runs the checks, so a command
    must not read the setting there: an option whose default comes from ``EVENTFERRY``
    defaults to None and is resolved in ``handle``, and its help names the setting (see
    ``_arguments.setting_default``). Then a broken setting gets the check report with its
    hints, as ``migrate`` does, instead of a traceback; ``--help`` prints the help and
    then the same report.
    """

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, add_help=False, **kwargs)
        parser.add_argument("-h", "--help", action=_HelpAction, command=self,
                            help="Show this help message and exit.")
        return parser

    def report_setting_problems(self) -> None:
        """Write eventferry's system check messages to stderr, if there are any."""
        try:
            self.check(tags=[TAG])
        except SystemCheckError as exc:
            self.stderr.write(f"\n{exc}\n\nThis command runs once these are fixed.")


class _HelpAction(argparse.Action):
    """``--help``: the help, then what is wrong with ``EVENTFERRY`` (if anything)."""

    def __init__(self, option_strings: Sequence[str], dest: str, command: EventferryCommand,
                 help: str | None = None) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                         nargs=0, help=help)
        self.command = command

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        parser.print_help()
        self.command.report_setting_problems()
        parser.exit()
