"""What the history commands (``outbox_archive``, ``outbox_replay``, ``outbox_report``)
share: the Spark arguments, progress output, and exit codes a scheduler can act on."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.core.management.base import CommandError, CommandParser, OutputWrapper
from django.db import Error

from ...exceptions import EventferryError
from ...history.errors import EXIT_FAILED, HistoryError
from ...history.masters import master_problem
from ._arguments import moment

EXIT_CODES_HELP = (
    "Exit codes: 0 done; 1 failed; 2 bad arguments; 3 pyspark, Java, a JDBC driver or "
    "deltalake missing; 4 another archive or erasure run holds the lock; 5 not verified, "
    "nothing committed."
)


def spark_master(text: str) -> str:
    """``--master``: a Spark master URL, or an argument error naming the forms."""
    problem = master_problem(text.strip())
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text.strip()


def add_spark_arguments(parser: CommandParser) -> None:
    parser.add_argument("--master", type=spark_master, metavar="URL",
                        help="Spark master URL: local[N], spark://HOST:PORT, yarn, "
                        "k8s://https://HOST:PORT (default: EVENTFERRY['SPARK']['MASTER'], "
                        "local[*]).")


def add_window_arguments(parser: CommandParser) -> None:
    """``--since``/``--until``: a window of processed_at."""
    parser.add_argument("--since", type=moment, help="Processed at or after: ISO "
                        "date-time (UTC unless it has an offset) or a duration ago (2d).")
    parser.add_argument("--until", type=moment, help="Processed before: ISO date-time "
                        "or a duration ago.")


def check_window(options: dict[str, Any]) -> None:
    if options["since"] and options["until"] and options["since"] >= options["until"]:
        raise CommandError("--since must be earlier than --until.")


#: Progress lines starting with this are counters: at most one a second is shown.
COUNTER_PREFIX = "  ... "


def progress_printer(stdout: OutputWrapper, verbosity: int) -> Callable[[str], None]:
    """Progress lines, each stamped with the seconds since the command started."""
    started = time.monotonic()
    last_counter = 0.0

    def write(message: str) -> None:
        nonlocal last_counter
        now = time.monotonic()
        if verbosity < 1:
            return
        if message.startswith(COUNTER_PREFIX):
            if now - last_counter < 1.0 and verbosity < 2:
                return
            last_counter = now
        stdout.write(f"[{now - started:7.1f}s] {message}")

    return write


@contextmanager
def exit_codes() -> Iterator[None]:
    """Turn the pipeline's errors into a CommandError with the exit code they call for."""
    try:
        yield
    except HistoryError as exc:
        raise CommandError(str(exc), returncode=exc.exit_code) from exc
    except EventferryError as exc:
        raise CommandError(str(exc), returncode=EXIT_FAILED) from exc
    except Error as exc:
        raise CommandError(f"Database error: {exc}", returncode=EXIT_FAILED) from exc
