from __future__ import annotations

from collections.abc import Iterator

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
