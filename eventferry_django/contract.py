"""The store contract's vocabulary, defined once: the status codes (stable forever) and
the groups of them that the SQL and the ORM share, the batch bound, and the buckets
relays share the aggregates by. Every SQL string, every model choice and every command's
range check is written from these."""

from __future__ import annotations

import functools
import hashlib
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
#: Each status's name, as commands, manifests and reports spell it: the one map from
#: code to name (the admin's labels are these, translated).
STATUS_NAMES: dict[int, str] = {int(code): code.name.lower() for code in StatusCode}
#: The code of each name of :data:`STATUS_NAMES`.
STATUS_CODES: dict[str, int] = {name: code for code, name in STATUS_NAMES.items()}
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


#: How many buckets the aggregates are hashed into (the outbox stores each row's).
#: Relays share the work by owning buckets; the count is stored data: it never changes.
BUCKETS = 256


#: Aggregates whose bucket is remembered: a relay works out the buckets of every batch
#: it claims and settles, and a few thousand busy aggregates make most of any backlog.
BUCKET_CACHE = 65_536


@functools.lru_cache(maxsize=BUCKET_CACHE)
def bucket_of(aggregate_id: str) -> int:
    """The bucket of ``aggregate_id`` (0 to :data:`BUCKETS` - 1): the first byte of the
    MD5 digest of its UTF-8 text, so every process, and every language and database that
    can compute MD5, puts an aggregate in the same bucket. (A spread, not a secret: MD5
    serves here as on a FIPS build, not for security.)"""
    return hashlib.md5(aggregate_id.encode("utf-8"), usedforsecurity=False).digest()[0]
