"""The Spark master URLs the history commands accept, checked before any JVM starts.

Spark itself rejects a bad master only after its JVM is up, with a stack trace; a
setting or a ``--master`` typo should instead be one line naming the forms that work.
The forms are Spark 4's: Mesos support is gone from it.
"""

from __future__ import annotations

import re

_HOST_PORT = r"[A-Za-z0-9._-]+:\d{1,5}"
_PATTERNS = (
    re.compile(r"local(\[(\*|[1-9]\d*)(,[1-9]\d*)?\])?"),  # local, local[4], local[*,2]
    re.compile(r"local-cluster\[[1-9]\d*,[1-9]\d*,[1-9]\d*\]"),
    re.compile(rf"spark://{_HOST_PORT}(,{_HOST_PORT})*"),  # several masters: standby ones
    re.compile(r"yarn"),
    re.compile(rf"k8s://(https?://)?{_HOST_PORT}"),
)

MASTER_FORMS = ("local[*]", "local[N]", "spark://HOST:PORT", "yarn", "k8s://https://HOST:PORT")


def master_problem(master: str) -> str | None:
    """Why ``master`` is not a Spark master URL, or None if it is one."""
    if any(pattern.fullmatch(master) for pattern in _PATTERNS):
        return None
    return (f"{master!r} is not a Spark master URL; use one of {', '.join(MASTER_FORMS)}.")
