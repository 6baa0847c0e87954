"""Which database errors the store runs again: a deadlock victim, whatever driver raised
it (pyodbc, mssql-python, psycopg, PyMySQL), as Django hands it over; and a real deadlock
on the test database, lost by a store operation that is then run again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
from django.db import Error, connection, connections, transaction
from django.db.utils import DatabaseErrorWrapper

from eventferry_django import NewEvent, publish_events
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.naming import TableName
from eventferry_django.publishers.memory import InMemoryPublisher
from eventferry_django.relay import Relay, RelayConfig
from eventferry_django.store import dialect_for
from eventferry_django.store.claim import ClaimRequest
from eventferry_django.store.outbox import ClaimedEvent, Failure, OutboxStore, Settlement

from .test_relay_rabbitmq import lock_poll_interval, lock_waiter, wait_until


def as_django(driver: ModuleType, exc: BaseException) -> Error:
    """``exc`` as Django re-raises a driver's exception (its own class, ``from`` it)."""
    wrapper = DatabaseErrorWrapper(SimpleNamespace(Database=driver, errors_occurred=False))
    try:
        with wrapper:
            raise exc
    except Error as wrapped:
        return wrapped
    raise AssertionError("not wrapped")


def microsoft_transient(exc: BaseException) -> bool:
    return dialect_for("microsoft", TableName("outbox")).ops.is_transient(exc)


DEADLOCK_TEXT = ("[Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Transaction (Process "
                 "ID 52) was deadlocked on lock resources with another process and has been "
                 "chosen as the deadlock victim. Rerun the transaction.")


def test_a_deadlock_victim_from_pyodbc_is_run_again() -> None:
    pyodbc = pytest.importorskip("pyodbc")
    victim = as_django(pyodbc, pyodbc.Error("40001", f"[40001] {DEADLOCK_TEXT} (1205) "
                                                     "(SQLExecDirectW)"))
    # pyodbc's base Error: outside DatabaseError, which is why the store catches Error.
    assert type(victim) is Error
    assert microsoft_transient(victim)


def test_a_deadlock_victim_from_mssql_python_is_run_again() -> None:
    mssql_python = pytest.importorskip("mssql_python")
    victim = as_django(mssql_python, mssql_python.exceptions.OperationalError(
        "Serialization failure", DEADLOCK_TEXT))
    assert microsoft_transient(victim)


@pytest.mark.parametrize("args", [
    ("HY000", "[HY000] [Microsoft][ODBC Driver 18 for SQL Server]General error (0)"),
    ("23000", "[23000] ... Violation of UNIQUE KEY constraint (2627) (SQLExecDirectW)"),
    ("42S02", "[42S02] ... Invalid object name 'dbo.outbox_1205'. (208) (SQLExecDirectW)"),
])
def test_other_pyodbc_errors_are_not(args: tuple[str, str]) -> None:
    pyodbc = pytest.importorskip("pyodbc")
    assert not microsoft_transient(as_django(pyodbc, pyodbc.Error(*args)))


def test_other_mssql_python_errors_are_not() -> None:
    mssql_python = pytest.importorskip("mssql_python")
    for exc in (mssql_python.exceptions.ProgrammingError("Syntax error", "near 1205"),
                mssql_python.exceptions.OperationalError("Timeout expired", "")):
        assert not microsoft_transient(as_django(mssql_python, exc))


# -- a real deadlock -------------------------------------------------------------------

#: How the other transaction makes sure the store's is the one rolled back.
LOSE_TO_ME = {
    "postgresql": ["SET LOCAL deadlock_timeout = '60s'"],  # the store's session checks first
    "microsoft": ["SET DEADLOCK_PRIORITY HIGH"],
    # InnoDB rolls back the lighter transaction: this one writes ballast first.
    "mysql": ["INSERT INTO testapp_order (reference, total) VALUES "
              + ", ".join(f"('ballast-{n}', 1)" for n in range(200))],
}


def hold(other: Any, event: ClaimedEvent) -> None:
    """Write-lock the event's row in ``other``'s transaction, without changing what the
    ack looks at."""
    table = other.ops.quote_name(OutboxEvent._meta.db_table)
    with other.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET last_error = %s WHERE id = %s", ["held", event.id])


@pytest.fixture
def other(second_connection: Any) -> Iterator[Any]:
    """A second connection, in a transaction that will not be the deadlock's victim."""
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: its writers queue and never deadlock")
    second_connection.set_autocommit(False)
    try:
        with second_connection.cursor() as cursor:
            for statement in LOSE_TO_ME[connection.vendor]:
                cursor.execute(statement)
        yield second_connection
    finally:
        second_connection.rollback()
        second_connection.set_autocommit(True)


@pytest.mark.django_db(transaction=True)
def test_a_store_operation_that_loses_a_real_deadlock_is_run_again(
    other: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="eventferry_django.store.bound")
    with transaction.atomic():
        publish_events([NewEvent("t", {}, "agg", aggregate) for aggregate in ("w", "x")])
    store = OutboxStore()
    # One batch; its settlement acks w and retries x: two UPDATEs, w then x.
    w, x = store.claim(2)
    settlement = Settlement(w.batch, delivered=[w], failures=[Failure(x, "refused")])
    hold(other, x)

    outcome: dict[str, Any] = {}
    updates: list[str] = []
    waiting_for_x = threading.Event()

    def watch(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if sql.lstrip().upper().startswith("UPDATE"):
            updates.append(sql)
            if len(updates) == 2:  # w is locked; this one waits for x
                waiting_for_x.set()
        return execute(sql, params, many, context)

    def ack() -> None:
        acking = OutboxStore(instance=store.instance)
        try:
            with acking.connection.execute_wrapper(watch):
                outcome["settled"], _ = acking.settle(settlement)
        except Exception as exc:
            outcome["error"] = exc
        finally:
            waiting_for_x.set()
            connections.close_all()

    def still_acking() -> None:
        """Fail now, naming the ack's error, if it has ended: it cannot have acked x while
        ``other`` holds it, so it failed (waiting on would only time out)."""
        if not thread.is_alive():
            raise AssertionError(f"the ack ended before it waited for x: {outcome!r}"
                                 ) from outcome.get("error")

    def ack_waits() -> bool:
        if lock_waiter(connection) is not None:
            return True
        still_acking()
        return False

    thread = threading.Thread(target=ack)
    thread.start()
    if connection.vendor == "microsoft":
        assert waiting_for_x.wait(30)
    # Asked of the server, not timed: the ack must wait for x before ``other`` asks for w,
    # or ``other`` is the victim (a statement new to a connection compiles for a while on
    # the T-SQL endpoint under load). PostgreSQL runs the ack prepared, past Django's
    # execute wrappers.
    wait_until(ack_waits, timeout=30, what="the ack to wait for x",
               interval=lock_poll_interval(connection))
    # The cycle closes within a second of the ack starting to wait: PostgreSQL (and the
    # T-SQL endpoint on it) looks for a deadlock once, a second after a wait begins.
    hold(other, w)  # returns once the ack's transaction is rolled back
    other.commit()
    thread.join(60)
    assert outcome.get("error") is None, repr(outcome["error"])
    assert outcome["settled"] == 2
    assert "transient database error, trying again (1/3)" in caplog.text
    assert list(OutboxEvent.objects.order_by("id").values_list("status", flat=True)) == [
        Status.DONE, Status.FAILED]


# -- the relay ---------------------------------------------------------------------------


class FirstClaimFails(OutboxStore):
    """The real store, whose first claim meets what pyodbc raises for a generic error."""

    failed = False

    def take(self, request: ClaimRequest, in_flight: Sequence[str] = ()
             ) -> list[ClaimedEvent]:
        if not self.failed:
            self.failed = True
            raise Error("HY000", "[HY000] [Microsoft][ODBC Driver 18 for SQL Server]"
                                 "General error (0) (SQLExecDirectW)")
        return super().take(request, in_flight)


@pytest.mark.django_db(transaction=True)
def test_the_relay_outlives_a_driver_error_outside_database_error() -> None:
    with transaction.atomic():
        publish_events([NewEvent("t", {}, "agg", "1")])
    InMemoryPublisher.reset()
    relay = Relay(RelayConfig(batch_size=10, poll_interval=0.05, until_empty=True,
                              error_backoff=0.01),
                  store=FirstClaimFails(), publisher=InMemoryPublisher())
    stats = relay.run()
    assert (stats.errors, stats.published) == (1, 1)
