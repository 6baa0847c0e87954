from __future__ import annotations

import fcntl
import importlib.util
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from tests.engine_gaps import (
    children_first_flush,
    connections_kept_between_tests,
    is_babelfish,
    skip_for_gap,
    skip_if_gap,
    temp_namespace_first,
)
from tests.flush_teardown import keep_migrated_rows_through_flushes


def pytest_configure(config: pytest.Config) -> None:
    keep_migrated_rows_through_flushes()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist with ``--dist loadgroup`` (scripts/legs.py), the tests that use
    the shared SparkSession go to one worker: one JVM per leg, not one per worker. First,
    because xdist's worker reads the group marks in a hook of its own that would
    otherwise run before this one and find none."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("spark"))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail a grouped test that xdist did not group: the run would pass with each worker
    starting a JVM of its own, and take minutes longer. pytest 9.2 with pytest-xdist 3.8
    does that (pytest-dev/pytest-xdist#1386): the dev extra keeps pytest below 9.2."""
    if (getattr(item.config.option, "loadgroup", False)
            and item.get_closest_marker("xdist_group") and "@" not in item.nodeid):
        pytest.fail(f"--dist loadgroup did not group {item.nodeid}: this pytest and "
                    "pytest-xdist do not work together (pytest-xdist#1386); install the "
                    "versions pyproject.toml's dev extra allows", pytrace=False)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None,
                                 django_db_blocker: Any) -> None:
    """Under pytest-xdist each worker has a test database of its own on every vendor
    (pytest-django suffixes the names in tests/settings.py with the worker's id). SQL
    Server's is kept between runs and created here if missing, one worker at a time: the
    T-SQL endpoint fails a CREATE DATABASE that runs beside another."""
    from django.conf import settings

    if settings.DATABASES["default"]["ENGINE"] == "mssql":
        with open(Path(tempfile.gettempdir()) / "eventferry-mssql-create.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with django_db_blocker.unblock():
                create_kept_test_database(connections["default"])


def create_kept_test_database(connection: BaseDatabaseWrapper) -> None:
    name = connection.settings_dict["TEST"]["NAME"]
    with connection.creation._nodb_cursor() as cursor:
        cursor.execute("SELECT 1 FROM sys.databases WHERE name = %s", [name])
        if cursor.fetchone() is None:
            cursor.execute(f"CREATE DATABASE {connection.ops.quote_name(name)}")


@pytest.fixture(scope="session")
def django_db_keepdb(request: pytest.FixtureRequest) -> bool:
    """SQL Server keeps its test databases (one per leg and worker; see tests/settings.py
    and django_db_modify_db_settings); others as asked."""
    from django.conf import settings

    if settings.DATABASES["default"]["ENGINE"] == "mssql":
        return True
    return bool(request.config.getvalue("reuse_db"))


@pytest.fixture(scope="session", autouse=True)
def _mssql_test_database(request: pytest.FixtureRequest, django_db_blocker: Any) -> None:
    """SQL Server's kept test database, emptied at the start; on the T-SQL endpoint, a
    flush whose DELETEs respect the foreign keys, and connections that create their
    temporary namespace first (engine_gaps.temp_namespace_first)."""
    from django.conf import settings

    if settings.DATABASES["default"]["ENGINE"] != "mssql":
        return
    request.getfixturevalue("django_db_setup")
    with django_db_blocker.unblock():
        if is_babelfish():
            children_first_flush(connections["default"])
            temp_namespace_first(connections["default"])
            connections_kept_between_tests()
        # The kept test database starts empty even after a run that was killed mid-test.
        # (No sequence reset: the endpoint's DBCC CHECKIDENT fails, and no test needs it.)
        call_command("flush", interactive=False, verbosity=0, reset_sequences=False)


@pytest.fixture(autouse=True)
def _babelfish_gaps(request: pytest.FixtureRequest, django_db_blocker: Any) -> None:
    """Skip a test marked with a Babelfish gap when it runs on that engine (engine_gaps)."""
    if request.node.get_closest_marker("babelfish_gap") is not None:
        request.getfixturevalue("django_db_setup")
        skip_if_gap(request.node, django_db_blocker.unblock)


@pytest.fixture
def vendor() -> str:
    return connections["default"].vendor


@pytest.fixture
def empty_relay_registry(transactional_db: None) -> None:
    """The relay registry is no model, so no flush empties it: relays of the worker's
    earlier tests (killed, or left by a test that failed) may still be checked in."""
    from eventferry_django.store.outbox import OutboxStore

    table = OutboxStore().dialect.name.relay_registry.quoted(connections["default"].vendor)
    with connections["default"].cursor() as cursor:
        cursor.execute(f"DELETE FROM {table}")


@pytest.fixture
def second_connection(transactional_db: None) -> Iterator[BaseDatabaseWrapper]:
    """A separate, real connection to the test database, as another process would have."""
    other = connections.create_connection("default")
    try:
        yield other
    finally:
        other.close()


def require_pyspark() -> None:
    """Skip the test, saying why, where pyspark is not installed; fail it instead under
    ``EVENTFERRY_REQUIRE_SPARK=1``, which ``make test``'s own database legs set: they
    install the ``spark`` extra, so a skip there would hide a broken set-up."""
    if importlib.util.find_spec("pyspark") is not None:
        return
    if os.environ.get("EVENTFERRY_REQUIRE_SPARK"):
        pytest.fail("EVENTFERRY_REQUIRE_SPARK is set but pyspark is not installed: "
                    "pip install -e '.[spark]'", pytrace=False)
    pytest.skip("pyspark is not installed (the spark extra: pip install -e '.[spark]'); "
                "the Spark history tests need it")


@pytest.fixture(scope="session")
def spark(django_db_setup: None, django_db_blocker: Any) -> Iterator[Any]:
    """One local SparkSession for the whole run, with the test database's JDBC driver.

    Without pyspark (the ``spark`` extra: ``pip install -e .[dev]`` alone, tox, the
    Python and Django legs of ``make test``) the tests that need Spark are skipped,
    saying so (``require_pyspark``). With it, missing Java or the driver jar fails them
    with the error naming what to install.
    """
    require_pyspark()
    from eventferry_django.conf import get_settings
    from eventferry_django.history.jdbc import outbox_source
    from eventferry_django.history.session import spark_session

    with django_db_blocker.unblock():
        source = outbox_source()
        if source.driver_name == "jtds":
            skip_for_gap("jtds-login-refused",
                         "the engine closes jTDS's login, so Spark cannot read the outbox")
    with spark_session(source, get_settings().spark) as session:
        yield session


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark standalone master and one worker (1 core, 1 GB) on 127.0.0.1, started
    from pyspark's jars once per run and stopped, with their processes, at its end."""
    require_pyspark()
    from .spark_cluster import standalone_cluster

    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster
