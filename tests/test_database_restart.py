"""A database crash mid-drain: the relay carries on, turns nothing dead, and drains the
backlog through the open-rows indexes although the planner's statistics are stale.

After a PostgreSQL crash the statistics counters that trigger autovacuum start again
from zero, so the statistics can stay those of a drained queue while a backlog waits:
in the soak every claim then took 6-13 s and leases ran out under live relays. Here the
outbox's statistics are taken when only done rows exist, autovacuum is off for it (the
counters never reach its threshold), the server crashes mid-drain and a second backlog
arrives after the restart. The relay's statistics keeper must notice; the index entries
the drain reads per event (counted from the restart on, since the crash reset the
counters) are bounded well below what stale plans read.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from benchmarks.servers import PrivatePostgres
from eventferry_django.models import OutboxEvent

from .relay_process import ROOT, wait_until
from .settings import VENDOR

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(VENDOR != "postgres", reason="PostgreSQL's statistics after a crash"),
]

DONE, BACKLOG, AGGREGATES = 20_000, 10_000, 100
#: Index entries read per event drained after the restart, at most. Measured here: 590-680
#: when the relay leaves the stale statistics alone, 96-107 when it refreshes them.
MAX_ENTRIES_PER_EVENT = 200


@pytest.fixture
def server() -> Iterator[PrivatePostgres]:
    base = Path(tempfile.mkdtemp(prefix="ef-restart-"))
    base.chmod(0o755)  # the private PostgreSQL runs as postgres when we are root
    try:
        with PrivatePostgres(base / "pg") as server:
            yield server
    finally:
        shutil.rmtree(base, ignore_errors=True)


def environment(server: PrivatePostgres) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT), DJANGO_SETTINGS_MODULE="tests.settings",
        EVENTFERRY_TEST_DB="postgres", PGHOST="127.0.0.1", PGPORT=str(server.port),
        PGUSER="postgres", EVENTFERRY_TEST_DB_NAME="postgres",
        EVENTFERRY_TEST_SETTINGS=json.dumps({
            "CLAIM_TIMEOUT": 10, "MAX_ATTEMPTS": 1,
            "PUBLISHER": {"BACKEND": "eventferry_django.publishers.memory.InMemoryPublisher"},
        }),
    )
    return env


def sql(server: PrivatePostgres, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(host="127.0.0.1", port=server.port, user="postgres",
                         dbname="postgres", autocommit=True) as db:
        cursor = db.execute(statement, params)
        return cursor.fetchall() if cursor.description else []


def add_rows(server: PrivatePostgres, count: int, *, done: bool) -> None:
    table = OutboxEvent._meta.db_table
    sql(server, f'INSERT INTO "{table}" (message_id, topic, aggregate_type, aggregate_id, '
                "payload, headers, status, processed_at) "
                "SELECT gen_random_uuid()::text, 't', 'a', (n %% %s)::text, '{}', '{}', %s, "
                "CASE WHEN %s THEN now() END FROM generate_series(1, %s) AS n",
        [AGGREGATES, 2 if done else 0, done, count])


def counts(server: PrivatePostgres) -> dict[int, int]:
    table = OutboxEvent._meta.db_table
    return dict(sql(server, f'SELECT status, count(*) FROM "{table}" GROUP BY status'))


def index_entries_read(server: PrivatePostgres) -> int:
    table = OutboxEvent._meta.db_table
    [(entries,)] = sql(server, "SELECT coalesce(sum(idx_tup_read), 0) FROM "
                               "pg_stat_user_indexes WHERE relname = %s", [table])
    return int(entries)


def test_a_crash_mid_drain_then_a_full_drain_through_the_open_rows_indexes(
    server: PrivatePostgres, tmp_path: Path,
) -> None:
    env = environment(server)
    subprocess.run([sys.executable, "-m", "django", "migrate", "-v", "0"], env=env,
                   cwd=ROOT, check=True)
    table = OutboxEvent._meta.db_table
    add_rows(server, DONE, done=True)
    sql(server, f'ANALYZE "{table}"')  # the statistics of a drained queue
    sql(server, f'ALTER TABLE "{table}" SET (autovacuum_enabled = off)')
    add_rows(server, BACKLOG, done=False)

    log = tmp_path / "relay.log"
    with log.open("ab") as out:
        relay = subprocess.Popen(
            [sys.executable, "-m", "django", "outbox_relay", "-v", "2",
             "--poll-interval", "0.2"], env=env, cwd=ROOT, stdout=out,
            stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: counts(server).get(2, 0) >= DONE + BACKLOG // 5, timeout=120,
                   what="the relay to drain a fifth of the backlog")
        server.restart()  # a crash: SIGQUIT, crash recovery at start
        assert index_entries_read(server) == 0  # the crash reset the counters
        done_at_restart = counts(server).get(2, 0)
        add_rows(server, BACKLOG, done=False)
        wait_until(lambda: counts(server).get(2, 0) == DONE + 2 * BACKLOG, timeout=180,
                   what="the relay to drain everything")
        drained = DONE + 2 * BACKLOG - done_at_restart
        entries = index_entries_read(server)
    finally:
        relay.send_signal(signal.SIGTERM)
        relay.wait(60)
    relay_log = log.read_text()
    assert counts(server) == {2: DONE + 2 * BACKLOG}, relay_log[-3000:]  # nothing dead
    assert entries <= MAX_ENTRIES_PER_EVENT * drained, (entries, drained, relay_log[-3000:])
    assert "outbox statistics refreshed" in relay_log


def test_a_private_postgres_whose_port_is_taken_before_it_binds_starts_on_another() -> None:
    """Another process binds the port picked for a private PostgreSQL before the server
    does (the suite's processes pick ports side by side): the server starts on another
    port, and is reached there. Before, its readiness probe could answer for whatever had
    the port while the server itself exited (a CI failure of the soak: "connection
    refused" right after "ready")."""
    base = Path(tempfile.mkdtemp(prefix="ef-port-taken-"))
    base.chmod(0o755)
    try:
        server = PrivatePostgres(base / "pg")
        taken = server.port
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", taken))
            squatter.listen()
            with server:
                assert server.port != taken
                with psycopg.connect(host="127.0.0.1", port=server.port, user="postgres",
                                     dbname="postgres") as conn:
                    assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        shutil.rmtree(base, ignore_errors=True)
