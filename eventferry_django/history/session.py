"""A SparkSession for the history commands, built from ``EVENTFERRY["SPARK"]`` and the
outbox's JDBC driver, or one clear error saying what to install.

Local mode (``local[*]``) is the default; ``MASTER`` (or a command's ``--master``)
names a cluster. Every session runs in UTC: partition days, hours in the report and
the casts of timestamp text all depend on the session time zone.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ..history_settings import SparkConfig
from .errors import MissingPrerequisite
from .jdbc import MSSQL_JDBC_MAVEN, JdbcSource

#: Settings every session gets unless ``SPARK["CONF"]`` says otherwise.
DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.shuffle.partitions": "16",
    # The archive writes each task's rows to its topic/day partitions through as many
    # open files; without concurrent writers Spark first sorts every task's rows by
    # partition, which costs more than the read. Past this many files a task sorts.
    "spark.sql.maxConcurrentOutputFileWriters": "256",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
#: A local session listens on loopback only.
LOCAL_CONF = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}

MINIMUM_JAVA = 17
JRE_PACKAGE = "openjdk-17-jre-headless"


def require_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise MissingPrerequisite(
            "pyspark is not installed: pip install 'eventferry-django[spark]'."
        ) from None


def java_version() -> int:
    """The major version of the Java runtime Spark will start, or a clear error."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        raise MissingPrerequisite(
            "No Java runtime found (no java on PATH, JAVA_HOME unset or wrong); Spark needs "
            f"Java {MINIMUM_JAVA} or newer. On Debian: apt-get install {JRE_PACKAGE}."
        )
    output = subprocess.run([java, "-version"], capture_output=True, text=True,
                            check=False).stderr
    match = re.search(r'version "(\d+)(?:\.(\d+))?', output)
    major = 0 if match is None else int(match[1]) if match[1] != "1" else int(match[2] or 0)
    if major < MINIMUM_JAVA:
        raise MissingPrerequisite(
            f"{java} is Java {major or 'of unknown version'}; Spark needs Java "
            f"{MINIMUM_JAVA} or newer. On Debian: apt-get install {JRE_PACKAGE}."
        )
    return major


def missing_jars(jars: Iterable[str]) -> list[str]:
    """The local jar files among ``jars`` that do not exist (URLs are not checked)."""
    return [j for j in jars if ("://" not in j or j.startswith("file://"))
            and not os.path.exists(j.removeprefix("file://"))]


def jdbc_jars(spark: SparkConfig, source: JdbcSource) -> list[str]:
    """The jars to put on Spark's class path for ``source``'s driver."""
    if spark.jars is not None:
        missing = missing_jars(spark.jars)
        if missing:
            raise MissingPrerequisite(
                f"EVENTFERRY['SPARK']['JARS'] names {', '.join(missing)}, which does not exist."
            )
        return list(spark.jars)
    debian = source.debian_jar
    if debian is None:
        if "spark.jars.packages" in spark.conf:
            return []
        raise MissingPrerequisite(
            "SQL Server through Microsoft's mssql-jdbc needs its jar: with access to Maven "
            "Central set EVENTFERRY['SPARK']['CONF'] = {'spark.jars.packages': "
            f"'{MSSQL_JDBC_MAVEN}'}}, or name the jar in EVENTFERRY['SPARK']['JARS']; or "
            "use jTDS: EVENTFERRY['SPARK']['SQLSERVER_DRIVER'] = 'jtds' and, on Debian, "
            "apt-get install libjtds-java."
        )
    path, package = debian
    if not os.path.exists(path):
        raise MissingPrerequisite(
            f"The {source.driver_name} JDBC driver is not installed ({path} is missing). "
            f"On Debian: apt-get install {package}; or name the jar in "
            "EVENTFERRY['SPARK']['JARS']."
        )
    return [path]


def session_conf(spark: SparkConfig, source: JdbcSource, master: str) -> dict[str, str]:
    conf = dict(DEFAULT_CONF)
    if master.startswith("local"):
        conf.update(LOCAL_CONF)
    conf.update(spark.conf)
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        # JVMs in UTC too, added to any options of the user's own.
        options = conf.get(key, "")
        if "-Duser.timezone=" not in options:
            conf[key] = f"{options} -Duser.timezone=UTC".strip()
    jars = jdbc_jars(spark, source)
    if jars:
        conf["spark.jars"] = ",".join(jars)
    return conf


@contextmanager
def spark_session(source: JdbcSource, spark: SparkConfig,
                  master: str | None = None) -> Iterator[Any]:
    """A SparkSession that can read ``source``; stopped on exit if this call started it.
    A session already running in this process (a notebook's, a test suite's) is used as
    it is."""
    require_pyspark()
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        yield SparkSession.builder.getOrCreate()
        return
    master = master or spark.master
    conf = session_conf(spark, source, master)
    java_version()
    if master.startswith("local"):
        # Read by Spark's launcher before any setting: otherwise it warns about, and
        # binds to, whatever address the host name resolves to.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName("eventferry")
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    try:
        yield session
    finally:
        session.stop()


@contextmanager
def watch_tasks(spark: Any, report: Callable[[int, int], None],
                every: float = 5.0) -> Iterator[None]:
    """Call ``report(done, total)`` with the tasks of the running Spark stages every
    ``every`` seconds while the block runs, so long jobs show progress."""
    stop = threading.Event()
    tracker = spark.sparkContext.statusTracker()

    def poll() -> None:
        while not stop.wait(every):
            stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            stages = [s for s in stages if s is not None]
            if stages:
                report(sum(s.numCompletedTasks for s in stages), sum(s.numTasks for s in stages))

    thread = threading.Thread(target=poll, name="eventferry-spark-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
