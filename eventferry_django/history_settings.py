"""The keys of ``EVENTFERRY`` that the history pipeline reads: how it starts Spark
(``SPARK``) and what ``outbox_archive`` writes (``ARCHIVE_FORMAT``). Parsed here for
:func:`eventferry_django.conf.parse`, which reports what is wrong through
``fail(key, message, hint)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .history.masters import master_problem
from .message_settings import Fail

#: ``SPARK``'s default (see the settings reference).
SPARK_DEFAULTS: dict[str, Any] = {
    "MASTER": "local[*]", "JARS": None, "CONF": {}, "SQLSERVER_DRIVER": "mssql-jdbc",
}
#: What ``outbox_archive`` can write.
ARCHIVE_FORMATS = ("parquet", "delta")
#: JDBC drivers the history pipeline can use for SQL Server.
SQLSERVER_DRIVERS = ("mssql-jdbc", "jtds")
#: Spark settings that have a key of their own in SPARK, so CONF cannot contradict it.
_SPARK_CONF_OWNED = {"spark.master": "MASTER", "spark.jars": "JARS"}


@dataclass(frozen=True)
class SparkConfig:
    """How the history pipeline (``outbox_archive``, ``outbox_replay``, ``outbox_report``)
    starts Spark. ``jars`` None means the JDBC driver of the outbox's database from the
    operating system's packages (see ``eventferry_django.history.jdbc``)."""

    master: str = SPARK_DEFAULTS["MASTER"]
    jars: tuple[str, ...] | None = SPARK_DEFAULTS["JARS"]
    conf: Mapping[str, str] = field(default_factory=dict)
    sqlserver_driver: str = SPARK_DEFAULTS["SQLSERVER_DRIVER"]


def parse_archive_format(value: Any, fail: Fail) -> str:
    """``ARCHIVE_FORMAT``: one of :data:`ARCHIVE_FORMATS`."""
    if value not in ARCHIVE_FORMATS:
        fail("ARCHIVE_FORMAT", f"is {value!r}; it must be one of "
             f"{', '.join(ARCHIVE_FORMATS)}.",
             "parquet writes Parquet runs with manifests; delta writes a Delta Lake "
             "table (needs the deltalake package of the spark extra).")
        return ARCHIVE_FORMATS[0]
    return value  # type: ignore[no-any-return]


_SPARK_HINT = (
    "SPARK is {'MASTER': 'local[*]' or a cluster URL, 'JARS': [paths or URLs of jars] or "
    "None for the database's JDBC driver from Debian's packages, 'CONF': {'spark.key': "
    "value}, 'SQLSERVER_DRIVER': 'mssql-jdbc' or 'jtds'}."
)


def parse_spark(raw: Any, fail: Fail) -> SparkConfig:
    """``SPARK``: how the history pipeline starts Spark."""
    if not isinstance(raw, Mapping):
        fail("SPARK", f"is {raw!r}; it must be a dict.", _SPARK_HINT)
        return SparkConfig()
    defaults = SparkConfig()
    unknown = set(raw) - set(SPARK_DEFAULTS)
    if unknown:
        fail("SPARK", f"has unknown keys {sorted(unknown)}.", _SPARK_HINT)
    master = raw.get("MASTER", defaults.master)
    problem = master_problem(master.strip()) if isinstance(master, str) else "not text"
    if problem:
        fail("SPARK", f"MASTER is {master!r}; it must be a Spark master URL.",
             "For example 'local[*]', 'local[2]', 'spark://host:7077', 'yarn' or "
             "'k8s://https://host:6443'.")
        master = defaults.master
    jars = raw.get("JARS", defaults.jars)
    if jars is not None and (
        isinstance(jars, str)
        or not isinstance(jars, list | tuple)
        or not all(isinstance(j, str) and j.strip() for j in jars)
    ):
        fail("SPARK", f"JARS is {jars!r}; it must be a list of jar paths or None.",
             _SPARK_HINT)
        jars = None
    conf = raw.get("CONF", {})
    if not isinstance(conf, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str | int | float | bool) for k, v in conf.items()
    ):
        fail("SPARK", f"CONF is {conf!r}; it must map Spark setting names to "
             "strings, numbers or booleans.", _SPARK_HINT)
        conf = {}
    for key in sorted(set(conf) & set(_SPARK_CONF_OWNED)):
        fail("SPARK", f"CONF sets {key!r}, which SPARK['{_SPARK_CONF_OWNED[key]}'] "
             "decides.", f"Move it to SPARK['{_SPARK_CONF_OWNED[key]}'].")
    driver = raw.get("SQLSERVER_DRIVER", defaults.sqlserver_driver)
    if driver not in SQLSERVER_DRIVERS:
        fail("SPARK", f"SQLSERVER_DRIVER is {driver!r}; it must be one of "
             f"{', '.join(SQLSERVER_DRIVERS)}.",
             "mssql-jdbc is Microsoft's driver; jtds is Debian's libjtds-java.")
        driver = defaults.sqlserver_driver
    return SparkConfig(
        master=master.strip(),
        jars=None if jars is None else tuple(j.strip() for j in jars),
        conf={k: _spark_value(v) for k, v in conf.items() if k not in _SPARK_CONF_OWNED},
        sqlserver_driver=driver,
    )


def _spark_value(value: str | int | float | bool) -> str:
    # Spark reads every setting as text; booleans are spelled in lower case there.
    return str(value).lower() if isinstance(value, bool) else str(value)
