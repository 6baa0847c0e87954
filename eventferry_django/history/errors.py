"""What can stop a history command, each with the exit code a scheduler acts on.

====  ===============================================================================
code  meaning
====  ===============================================================================
0     done (also: nothing to do)
1     failed: an unexpected error, a database error; see the message, then run again
2     bad arguments (argparse)
3     set-up: pyspark, Java or a JDBC driver jar is missing, or the database settings
      cannot become a JDBC connection; install or configure, then run again
4     busy: another ``outbox_archive`` holds the archive's lock; run again later
5     not verified: the archive read back did not match the database; nothing was
      committed or purged; run again
====  ===============================================================================
"""

from __future__ import annotations

from ..exceptions import EventferryError

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_SETUP = 3
EXIT_BUSY = 4
EXIT_UNVERIFIED = 5


class HistoryError(EventferryError):
    """A history command cannot go on; ``exit_code`` says what a scheduler should do."""

    exit_code = EXIT_FAILED


class MissingPrerequisite(HistoryError):
    """pyspark, a Java runtime or a JDBC driver jar is not installed."""

    exit_code = EXIT_SETUP


class JdbcSettingsError(HistoryError):
    """The outbox's ``DATABASES`` entry cannot be expressed as a JDBC connection."""

    exit_code = EXIT_SETUP


class ArchiveBusy(HistoryError):
    """Another archive run holds the lock of the same archive path."""

    exit_code = EXIT_BUSY


class NotVerified(HistoryError):
    """The Parquet read back does not match the database: nothing was committed."""

    exit_code = EXIT_UNVERIFIED
