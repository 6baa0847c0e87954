"""Test settings. ``EVENTFERRY_TEST_DB`` picks the database: sqlite (default), postgres,
mariadb or mssql. SQL Server needs ``EVENTFERRY_MSSQL_URL``, e.g.
``mssql://sa:Secret123!@localhost:1433/eventferry?driver=ODBC+Driver+18+for+SQL+Server&TrustServerCertificate=yes``
(``make test-mssql`` sets it to the local T-SQL endpoint when none is given), and
``EVENTFERRY_MSSQL_DRIVER`` picks mssql-django's Python driver: pyodbc (default) or
mssql_python.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

SECRET_KEY = "eventferry-tests"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.admin",
    "django.contrib.staticfiles",
    "eventferry_django",
    "tests.testapp",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
ROOT_URLCONF = "tests.urls"
STATIC_URL = "static/"

VENDOR = os.environ.get("EVENTFERRY_TEST_DB", "sqlite")
#: Set by tests that start relays as real processes, so they use the test database.
DB_NAME_OVERRIDE = os.environ.get("EVENTFERRY_TEST_DB_NAME")


def _mssql_database() -> dict[str, Any]:
    url = os.environ.get("EVENTFERRY_MSSQL_URL")
    if not url:
        raise ImproperlyConfigured(
            "EVENTFERRY_TEST_DB=mssql needs EVENTFERRY_MSSQL_URL="
            "mssql://USER:PASSWORD@HOST:PORT/DATABASE?driver=ODBC+Driver+18+for+SQL+Server"
        )
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    driver = query.pop("driver", "ODBC Driver 18 for SQL Server")
    extra = ";".join(f"{k}={v}" for k, v in query.items())
    options: dict[str, Any] = {"driver": driver, "extra_params": extra}
    python_driver = os.environ.get("EVENTFERRY_MSSQL_DRIVER", "pyodbc")
    if python_driver == "mssql_python":
        options["python_driver"] = "mssql_python"
    elif python_driver != "pyodbc":
        raise ImproperlyConfigured(
            f"EVENTFERRY_MSSQL_DRIVER={python_driver!r}; use pyodbc or mssql_python."
        )
    return {
        "ENGINE": "mssql",
        "NAME": parts.path.lstrip("/") or "eventferry",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "localhost",
        "PORT": str(parts.port or 1433),
        "OPTIONS": options,
        # One fixed test database that is kept between runs (tests/conftest.py asks for
        # keepdb): creating and dropping a database per run needs ALTER DATABASE rights
        # a shared SQL Server seldom grants, and the T-SQL endpoint has no ALTER DATABASE.
        "TEST": {"NAME": os.environ.get("EVENTFERRY_MSSQL_TEST_NAME", "eventferry_test")},
    }


DATABASES: dict[str, dict[str, Any]]
if VENDOR == "sqlite":
    # A file, not :memory:, so tests can open a second real connection to it.
    _sqlite_dir = Path(os.environ.get("EVENTFERRY_SQLITE_DIR", tempfile.gettempdir()))
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(_sqlite_dir / f"eventferry-{os.getpid()}.sqlite3"),
        "TEST": {"NAME": str(_sqlite_dir / f"eventferry-test-{os.getpid()}.sqlite3")},
    }}
elif VENDOR == "postgres":
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("PGDATABASE", "eventferry"),
        "USER": os.environ.get("PGUSER", "postgres"),
        "PASSWORD": os.environ.get("PGPASSWORD", ""),
        "HOST": os.environ.get("PGHOST", "127.0.0.1"),
        "PORT": os.environ.get("PGPORT", "5432"),
        # One test database per run, so runs side by side do not trip over each other.
        "TEST": {"NAME": f"test_eventferry_{os.getpid()}"},
    }}
elif VENDOR == "mariadb":
    import pymysql

    pymysql.install_as_MySQLdb()
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": os.environ.get("MYSQL_DATABASE", "eventferry"),
        "USER": os.environ.get("MYSQL_USER", "root"),
        "PASSWORD": os.environ.get("MYSQL_PASSWORD", ""),
        "HOST": os.environ.get("MYSQL_HOST", "127.0.0.1"),
        "PORT": os.environ.get("MYSQL_PORT", "3306"),
        "OPTIONS": {"charset": "utf8mb4"},
        "TEST": {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_bin",
                 "NAME": f"test_eventferry_{os.getpid()}"},
    }}
elif VENDOR == "mssql":
    DATABASES = {"default": _mssql_database()}
    # Django's own apps get their tables from their models, not their migrations: the
    # suite tests this project's migrations, not contenttypes' history, whose 0002
    # (ALTER COLUMN ... NULL on a column the next step drops) the T-SQL endpoint refuses.
    # The tables are the same either way, on SQL Server too.
    MIGRATION_MODULES = {app: None for app in ("auth", "contenttypes", "sessions", "admin")}
else:
    raise ImproperlyConfigured(
        f"EVENTFERRY_TEST_DB={VENDOR!r}; use sqlite, postgres, mariadb or mssql."
    )

#: The alias of a second, independent database for the multi-database tests, which ask
#: for it with ``django_db(databases=["default", SECOND])``: another PostgreSQL database
#: beside PostgreSQL, PostgreSQL beside SQLite. pytest-django creates a test database
#: only for aliases that collected tests use, so other runs never connect to it.
SECOND = "second"
if VENDOR in {"sqlite", "postgres"}:
    DATABASES[SECOND] = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("PGDATABASE", "eventferry") + "_second",
        "USER": os.environ.get("PGUSER", "postgres"),
        "PASSWORD": os.environ.get("PGPASSWORD", ""),
        "HOST": os.environ.get("PGHOST", "127.0.0.1"),
        "PORT": os.environ.get("PGPORT", "5432"),
        "TEST": {"NAME": f"test_eventferry_second_{os.getpid()}"},
    }

if DB_NAME_OVERRIDE:
    DATABASES["default"]["NAME"] = DB_NAME_OVERRIDE
    # Relay processes keep their connection between passes, as a production relay should.
    DATABASES["default"]["CONN_MAX_AGE"] = 600

# Each JVM maps the classes a Spark job loads from the archive `make test` writes
# (scripts/spark_class_archive.py) where there is one: it starts on about half the CPU.
SPARK_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SPARK_CLASSES = Path(sys.prefix) / "spark-classes.jsa"
if SPARK_CLASSES.is_file():
    SPARK_JAVA_OPTIONS += f" -XX:SharedArchiveFile={SPARK_CLASSES} -Xlog:cds*=off"

EVENTFERRY: dict[str, Any] = {
    "PUBLISHER": {"BACKEND": "eventferry_django.publishers.memory.InMemoryPublisher"},
    # Heads only, as before chains: the suite written for that behaviour pins that
    # MAX_CHAIN = 1 keeps it exactly. Chain tests (test_chains.py) set their own.
    "MAX_CHAIN": 1,
    # The tests' Spark jobs are small and short: few shuffle partitions, and a JIT that
    # compiles quickly rather than well. SQL Server through Debian's jTDS: Microsoft's
    # driver is not packaged.
    "SPARK": {"MASTER": "local[2]", "SQLSERVER_DRIVER": "jtds", "CONF": {
        "spark.sql.shuffle.partitions": 4,
        # Their queries run once each on little data: compiling each plan to Java (whole-
        # stage code generation) costs more CPU than it saves, about a sixth of the JVMs'.
        "spark.sql.codegen.wholeStage": False,
        "spark.driver.extraJavaOptions": SPARK_JAVA_OPTIONS,
    }},
}
# Relays started as real processes by the tests get their EVENTFERRY through the environment.
if os.environ.get("EVENTFERRY_TEST_SETTINGS"):
    EVENTFERRY = json.loads(os.environ["EVENTFERRY_TEST_SETTINGS"])
# Worker and relay processes of the task backend's tests get their TASKS through the
# environment (tests in process set settings.TASKS themselves).
if os.environ.get("EVENTFERRY_TEST_TASKS"):
    TASKS = json.loads(os.environ["EVENTFERRY_TEST_TASKS"])
