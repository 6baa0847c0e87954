"""How a SQL Server error reads through Django, whichever driver raised it (pyodbc or
mssql-python): its SQLSTATE and its native error numbers, from which the dialect tells
a deadlock victim that may simply run again."""

from __future__ import annotations

import functools
import re

#: SQL Server's error number for a deadlock victim; the operation is run again.
DEADLOCK_VICTIM = 1205
#: The SQLSTATE of a deadlock victim (and of a snapshot update conflict): the server
#: rolled the transaction back, so the same work may simply run again.
SERIALIZATION_FAILURE = "40001"
#: pyodbc ends a message with the native error number in parentheses: "... (1205)
#: (SQLExecDirectW)".
_NATIVE_ERROR = re.compile(r"\((\d+)\)")


def _driver_error(exc: BaseException) -> BaseException:
    # Django re-raises the driver's exception as its own class, same args, "from" it.
    return exc.__cause__ if exc.__cause__ is not None else exc


@functools.cache
def _mssql_python_text(sqlstate: str) -> str | None:
    """How mssql-python names ``sqlstate`` in its exceptions (None without it)."""
    try:
        from mssql_python.exceptions import sqlstate_to_exception
    except ImportError:
        return None
    exc = sqlstate_to_exception(sqlstate, "")
    return None if exc is None else str(exc.driver_error)


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a SQL Server error raised through Django, whichever driver raised
    it. pyodbc passes it as the first argument, whatever the exception's class (40001 and
    HY000 come as its base ``Error``, which Django wraps as ``django.db.Error``, outside
    ``DatabaseError``). mssql-python does not keep it: only the text its own table gives
    the SQLSTATE, as ``driver_error``, which is matched back against that table."""
    driver = _driver_error(exc)
    first = driver.args[0] if driver.args else None
    if isinstance(first, str) and len(first) == 5 and first.isalnum():
        return first
    text = getattr(driver, "driver_error", None)
    if text is not None and text == _mssql_python_text(SERIALIZATION_FAILURE):
        return SERIALIZATION_FAILURE
    return None


def native_errors(exc: BaseException) -> set[int]:
    """SQL Server error numbers in the message, where the driver writes them (pyodbc)."""
    return {int(n) for arg in _driver_error(exc).args if isinstance(arg, str)
            for n in _NATIVE_ERROR.findall(arg)}
