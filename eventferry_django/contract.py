"""The store contract's vocabulary, defined once: the status codes (stable forever) and
the groups of them that the SQL and the ORM share, and the batch bound. Every SQL string,
every model choice and every command's range check is written from these."""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum


class StatusCode(IntEnum):
    """Stored as TINYINT."""

    PENDING = 0
    CLAIMED = 1
    DONE = 2
    FAILED = 3
    DEAD = 4


PENDING, CLAIMED, DONE, FAILED, DEAD = (int(code) for code in StatusCode)
#: The statuses that hold back later events of the same aggregate.
OPEN: tuple[int, ...] = (PENDING, CLAIMED, FAILED)
#: The statuses no relay will touch again: what purge and the archive read.
CLOSED: tuple[int, ...] = (DONE, DEAD)


def sql_list(codes: Iterable[int]) -> str:
    """``codes`` as an SQL list, ``(0, 1, 3)``: literals, which a filtered index's
    predicate can be matched against (a bound parameter cannot)."""
    return f"({', '.join(str(int(code)) for code in codes)})"


#: The most rows one claim, settlement or delete touches (and the largest batch size a
#: setting or a command may ask for).
MAX_BATCH = 10_000
