"""The relay registry: where the running relays of an outbox check in,
so each knows how many there are and which one it is (see
:mod:`~eventferry_django.relay.membership`).

A few rows, read and written every second or two by each relay: plain statements the
dialect's clock and quoting spell for every vendor.
"""

from __future__ import annotations

import uuid
from typing import Any

from .bound import BoundStore
from .ops import SqlOps

#: How this release's relays' instance names start: those of 0.2.0, which hold bucket
#: leases. A relay of 0.1.0 checks in as "b:..." and one of a development build before
#: it with no prefix (see "Rolling upgrades" in :mod:`~eventferry_django.relay.membership`).
BUCKET_RELAY = "b2:"

#: A row unseen for this many check-in windows is deleted by the next check-in of any
#: relay (a relay that was killed does not delete its own).
FORGET_AFTER_WINDOWS = 10


def new_instance() -> str:
    """A name for a relay instance starting now: what it checks in, holds bucket leases
    and writes its batches in flight under. Unique, so a relay restarted on the same
    host never mistakes the batches of the one before for its own."""
    return f"{BUCKET_RELAY}{uuid.uuid4().hex}"


class RegistrySql:
    """The registry's statements on one vendor: a part of the outbox's dialect."""

    def __init__(self, ops: SqlOps) -> None:
        self.ops = ops
        self.table = ops.name.relay_registry.quoted(ops.vendor)
        q = ops.quote
        self.instance, self.relay_id, self.seen_at = q("instance"), q("relay_id"), q("seen_at")

    def check_in(self, cursor: Any, instance: str, relay_id: str, live_for_ms: int
                 ) -> list[str]:
        """Stamp ``instance`` seen now (adding it if it is missing, say after a long
        outage got it forgotten), forget rows long unseen, and return the instances
        seen within ``live_for_ms`` (:meth:`live`)."""
        cursor.execute(f"UPDATE {self.table} SET {self.seen_at} = {self.ops.now_sql} "
                       f"WHERE {self.instance} = %s", [instance])
        if cursor.rowcount == 0:
            cursor.execute(f"INSERT INTO {self.table} ({self.instance}, {self.relay_id}) "
                           "VALUES (%s, %s)", [instance, relay_id])
        cursor.execute(f"DELETE FROM {self.table} WHERE {self.seen_at} < {self.ops.now_plus_sql()}",
                       [self.ops.offset_param(-live_for_ms * FORGET_AFTER_WINDOWS)])
        return self.live(cursor, live_for_ms)

    def live(self, cursor: Any, live_for_ms: int) -> list[str]:
        """The instances seen within ``live_for_ms``, in one order every relay agrees on."""
        cursor.execute(f"SELECT {self.instance} FROM {self.table} WHERE {self.seen_at} > "
                       f"{self.ops.now_plus_sql()} ORDER BY {self.instance}",
                       [self.ops.offset_param(-live_for_ms)])
        return [str(row[0]) for row in cursor.fetchall()]

    def leave(self, cursor: Any, instance: str) -> int:
        cursor.execute(f"DELETE FROM {self.table} WHERE {self.instance} = %s", [instance])
        return int(cursor.rowcount)


class RelayRegistry(BoundStore):
    """The relay registry beside the outbox on one database alias."""

    def __init__(self, using: str | None = None) -> None:
        super().__init__(using)
        self.sql = RegistrySql(self.dialect.ops)

    def check_in(self, instance: str, relay_id: str, live_for: float) -> list[str]:
        """See :meth:`RegistrySql.check_in`; ``live_for`` in seconds. One transaction."""
        return self._run(lambda cursor: self.sql.check_in(cursor, instance, relay_id,
                                                          round(live_for * 1000)))

    def live(self, live_for: float) -> list[str]:
        """See :meth:`RegistrySql.live`; ``live_for`` in seconds."""
        return self._run(lambda cursor: self.sql.live(cursor, round(live_for * 1000)),
                         atomic=False)

    def leave(self, instance: str) -> int:
        """Remove ``instance``: the others take its part at their next check-in."""
        return self._run(lambda cursor: self.sql.leave(cursor, instance), atomic=False)
