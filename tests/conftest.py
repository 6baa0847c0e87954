from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper


@pytest.fixture
def vendor() -> str:
    return connections["default"].vendor


@pytest.fixture
def second_connection(transactional_db: None) -> Iterator[BaseDatabaseWrapper]:
    """A separate, real connection to the test database, as another process would have."""
    other = connections.create_connection("default")
    try:
        yield other
    finally:
        other.close()


@pytest.fixture(scope="session")
def spark(django_db_setup: None, django_db_blocker: Any) -> Iterator[Any]:
    """One local SparkSession for the whole run, with the test database's JDBC driver.

    Missing pyspark, Java or the driver jar fails the tests that need Spark with the
    error naming what to install: `make test` installs them, so a skip would hide a
    broken set-up.
    """
    from eventferry_django.conf import get_settings
    from eventferry_django.history.jdbc import outbox_source
    from eventferry_django.history.session import spark_session

    with django_db_blocker.unblock():
        source = outbox_source()
    with spark_session(source, get_settings().spark) as session:
        yield session
