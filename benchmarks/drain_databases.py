"""The private databases a drain benchmark runs on (:mod:`benchmarks.servers`), each with
the Django settings that reach it, its set-based SQL and, with ``statements``, the
statements that cost the most time (PostgreSQL's ``pg_stat_statements``, MariaDB's
performance schema)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import servers


class Database:
    """A private server, the Django settings that reach it, and its set-based SQL."""

    vendor: str
    #: The server, and the same with its statement statistics on (``--statements``).
    server_class: type[servers.PrivateServer]
    statements_class: type[servers.PrivateServer]
    #: What benchmarks/soak_settings.py calls the vendor.
    soak_vendor: str

    def __init__(self, base: Path, statements: bool = False) -> None:
        self.server = (self.statements_class if statements else self.server_class)(base)
        self.statements = statements

    def env(self) -> dict[str, str]:
        return {"EVENTFERRY_SOAK_VENDOR": self.soak_vendor,
                "EVENTFERRY_SOAK_DB_HOST": self.socket(),
                "EVENTFERRY_SOAK_DB_PORT": str(self.server.port)}

    def socket(self) -> str:
        """Where the server's unix socket is (Django's HOST)."""
        raise NotImplementedError

    def __enter__(self) -> Database:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(None, None, None)

    def server_pid(self) -> int:
        raise NotImplementedError

    def create(self) -> None:
        raise NotImplementedError

    def drop(self) -> None:
        """Drop the database :meth:`create` made, whoever is connected to it."""
        raise NotImplementedError

    def empty(self) -> None:
        raise NotImplementedError

    def written(self) -> Written:
        """What the server has written so far (its counters since it started)."""
        raise NotImplementedError

    #: The query of :meth:`top_statements`, and the format of each of its rows.
    statements_sql: str
    statement_line: str

    def top_statements(self) -> list[str]:
        """The statements that took the most time since :meth:`empty` (with
        ``statements``), one line each."""
        if not self.statements:
            return []
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(self.statements_sql)
            return [self.statement_line.format(*row) for row in cursor.fetchall()]


@dataclass(frozen=True)
class Written:
    """A server's write counters: its log (PostgreSQL's WAL, InnoDB's redo log) in
    bytes, and the outbox's rows updated (``hot``: PostgreSQL's heap-only updates among
    them, which add no index entry; None elsewhere) and deleted."""

    log_bytes: int
    updated: int
    hot: int | None
    deleted: int

    def __sub__(self, other: Written) -> Written:
        hot = None if self.hot is None or other.hot is None else self.hot - other.hot
        return Written(self.log_bytes - other.log_bytes, self.updated - other.updated, hot,
                       self.deleted - other.deleted)


class StatementsPostgres(servers.PrivatePostgres):
    """The private PostgreSQL with ``pg_stat_statements`` loaded (``--statements``)."""

    def start(self) -> None:
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("shared_preload_libraries = 'pg_stat_statements'\n"
                       "pg_stat_statements.track = all\n")
        super().start()


class Postgres(Database):
    vendor = "postgresql"
    server_class, statements_class = servers.PrivatePostgres, StatementsPostgres
    soak_vendor = "postgres"

    def socket(self) -> str:
        return str(self.server.base)

    def server_pid(self) -> int:
        return int((self.server.data / "postmaster.pid").read_text().split()[0])

    def create(self) -> None:
        import psycopg

        with psycopg.connect(host=str(self.server.base), port=self.server.port, user="postgres",
                             dbname="postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE soak")

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(host=str(self.server.base), port=self.server.port, user="postgres",
                             dbname="postgres", autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS soak WITH (FORCE)")

    def written(self) -> Written:
        """The table's counters come from its backends' flushed statistics: read them
        once the relays have exited (a backend flushes at exit)."""
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, n_tup_upd, "
                "n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables WHERE relid = %s::regclass",
                [outbox_table()])
            return Written(*(int(n) for n in cursor.fetchone()))

    def empty(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE {outbox_table()}")
            cursor.execute(f"VACUUM ANALYZE {outbox_table()}")
            if self.statements:
                cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                cursor.execute("SELECT pg_stat_statements_reset()")

    #: The statements that took the most time since :meth:`empty`: calls, ms and shared
    #: buffers per call, rows per call.
    statements_sql = (
        "SELECT calls, total_exec_time / calls, (shared_blks_hit + shared_blks_read) "
        "/ calls, rows / calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 70) "
        "FROM pg_stat_statements WHERE calls > 0 ORDER BY total_exec_time DESC LIMIT 8")
    statement_line = "  {:>7,} calls {:8.2f} ms {:9,.0f} buffers {:6,.0f} rows {}"


class StatementsMariaDB(servers.PrivateMariaDB):
    """The private MariaDB with the performance schema on (``--statements``)."""

    def _options(self) -> list[str]:
        return [*super()._options(), "--performance-schema=ON"]


class Mariadb(Database):
    vendor = "mysql"
    server_class, statements_class = servers.PrivateMariaDB, StatementsMariaDB
    soak_vendor = "mariadb"

    def socket(self) -> str:
        return str(self.server.base / "mysqld.sock")

    def server_pid(self) -> int:
        return int((self.server.base / "mysqld.pid").read_text().split()[0])

    def create(self) -> None:
        import pymysql

        conn = pymysql.connect(unix_socket=str(self.server.base / "mysqld.sock"), user="root")
        with conn.cursor() as cursor:
            cursor.execute("CREATE DATABASE soak CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        conn.close()

    def drop(self) -> None:
        import pymysql

        conn = pymysql.connect(unix_socket=str(self.server.base / "mysqld.sock"), user="root")
        with conn.cursor() as cursor:
            cursor.execute("DROP DATABASE IF EXISTS soak")
        conn.close()

    def written(self) -> Written:
        """The server's counters, every table's: on a private server the relay registry's
        few check-ins are all the rest."""
        from django.db import connection

        with connection.cursor() as cursor:
            # MariaDB 10.11 has no Innodb_rows_* counters any more; the handler counters
            # count the rows the statements asked the engine to change.
            cursor.execute("SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_os_log_written', "
                           "'Handler_update', 'Handler_delete')")
            counters = {name: int(value) for name, value in cursor.fetchall()}
        return Written(counters["Innodb_os_log_written"], counters["Handler_update"], None,
                       counters["Handler_delete"])

    def empty(self) -> None:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute(f"TRUNCATE TABLE {outbox_table()}")
            cursor.execute(f"ANALYZE TABLE {outbox_table()}")
            cursor.fetchall()
            if self.statements:
                cursor.execute("TRUNCATE performance_schema.events_statements_summary_by_digest")

    #: The statements that took the most time since :meth:`empty`: calls, ms per call,
    #: rows examined and sent per call.
    statements_sql = (
        "SELECT count_star, sum_timer_wait / count_star / 1e9, sum_rows_examined / "
        "count_star, sum_rows_sent / count_star, left(digest_text, 70) "
        "FROM performance_schema.events_statements_summary_by_digest "
        "WHERE count_star > 0 ORDER BY sum_timer_wait DESC LIMIT 8")
    statement_line = "  {:>7,} calls {:8.2f} ms {:9,.0f} examined {:6,.0f} rows {}"


DATABASES = {"postgresql": Postgres, "mariadb": Mariadb}


def outbox_table() -> str:
    from django.db import connection

    from eventferry_django.models import OutboxEvent

    return connection.ops.quote_name(OutboxEvent._meta.db_table)


def checked_in() -> int:
    """Relays in the relay registry now."""
    from django.db import connection

    from eventferry_django.store.outbox import OutboxStore

    registry = OutboxStore().dialect.name.relay_registry.quoted(connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {registry}")
        return int(cursor.fetchone()[0])


def in_a_process_each(vendors: Sequence[str], script: str) -> bool:
    """With several databases, run ``script`` again once for each (``--vendors`` the one)
    and return True: Django is set up once per process. With one, return False."""
    if len(vendors) < 2:
        return False
    for name in vendors:
        subprocess.run([sys.executable, script, *sys.argv[1:], "--vendors", name], check=True)
    return True


@contextlib.contextmanager
def private_directory(prefix: str) -> Iterator[Path]:
    """A directory for a benchmark's private servers and logs, removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    base.chmod(0o755)  # a private PostgreSQL runs as postgres when we are root
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)
