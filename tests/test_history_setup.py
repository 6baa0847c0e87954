"""What the history pipeline needs before Spark runs: JDBC connections derived from
Django's DATABASES (SQL Server's ODBC-style settings included), the SPARK setting, and
one clear error for each missing piece. No Spark is started here."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from eventferry_django.checks import check_settings
from eventferry_django.conf import parse
from eventferry_django.history import jdbc, session
from eventferry_django.history.errors import JdbcSettingsError, MissingPrerequisite
from eventferry_django.history.jdbc import jdbc_source, parse_odbc_keywords
from eventferry_django.history_settings import SparkConfig

ROOT = Path(__file__).resolve().parent.parent


def mssql(host: str = "db.example.com", port: str = "", extra: str = "",
          driver: str = "ODBC Driver 18 for SQL Server", **more: Any) -> dict[str, Any]:
    return {"ENGINE": "mssql", "NAME": "shop", "USER": "app", "PASSWORD": "p;w={x}",
            "HOST": host, "PORT": port,
            "OPTIONS": {"driver": driver, "extra_params": extra, **more.pop("options", {})},
            **more}


@pytest.mark.parametrize(("settings", "url"), [
    (mssql(port="1433"), "jdbc:sqlserver://db.example.com:1433;databaseName=shop;encrypt=true"),
    (mssql(driver="ODBC Driver 17 for SQL Server"),
     "jdbc:sqlserver://db.example.com;databaseName=shop;encrypt=false"),
    (mssql(host="db\\SQLEXPRESS", extra="Encrypt=yes;TrustServerCertificate=yes"),
     "jdbc:sqlserver://db\\SQLEXPRESS;databaseName=shop;encrypt=true;trustServerCertificate=true"),
    (mssql(host="db\\SQLEXPRESS", port="1450", extra="Encrypt=no"),
     "jdbc:sqlserver://db\\SQLEXPRESS:1450;databaseName=shop;encrypt=false"),
    (mssql(host="tcp:srv.database.windows.net,1433",
           extra="Encrypt=strict;HostNameInCertificate=*.database.windows.net;"
                 "ApplicationIntent=ReadOnly;MultiSubnetFailover=yes;LoginTimeout=30"),
     "jdbc:sqlserver://srv.database.windows.net:1433;databaseName=shop;encrypt=strict;"
     "hostNameInCertificate=*.database.windows.net;applicationIntent=ReadOnly;"
     "multiSubnetFailover=true;loginTimeout=30"),
    (mssql(extra="Encrypt=yes;TrustServerCertificate=no;Authentication=ActiveDirectoryMsi"),
     "jdbc:sqlserver://db.example.com;databaseName=shop;encrypt=true;"
     "trustServerCertificate=false;authentication=ActiveDirectoryMSI"),
    (mssql(USER="", extra="TrustServerCertificate=yes", options={"connection_timeout": 15}),
     "jdbc:sqlserver://db.example.com;databaseName=shop;encrypt=true;"
     "trustServerCertificate=true;loginTimeout=15;integratedSecurity=true;"
     "authenticationScheme=JavaKerberos"),
])
def test_mssql_django_settings_become_an_mssql_jdbc_url(settings: dict[str, Any], url: str) -> None:
    source = jdbc_source(settings, "microsoft")
    assert source.url == url
    assert source.driver_class == "com.microsoft.sqlserver.jdbc.SQLServerDriver"
    assert source.debian_jar is None
    if settings["USER"]:
        # Credentials travel as properties, never in the URL.
        assert source.properties == {"user": "app", "password": "p;w={x}"}
        assert "p;w" not in source.url


@pytest.mark.parametrize(("settings", "url"), [
    (mssql(port="1433", extra="Encrypt=yes;TrustServerCertificate=yes"),
     "jdbc:jtds:sqlserver://db.example.com:1433/shop;ssl=require"),
    (mssql(host="db\\SQLEXPRESS", driver="ODBC Driver 17 for SQL Server", extra="APP=shop"),
     "jdbc:jtds:sqlserver://db/shop;instance=SQLEXPRESS;appName=shop"),
    (mssql(extra="Encrypt=yes"), "jdbc:jtds:sqlserver://db.example.com/shop;ssl=authenticate"),
])
def test_mssql_django_settings_become_a_jtds_url(settings: dict[str, Any], url: str) -> None:
    source = jdbc_source(settings, "microsoft", sqlserver_driver="jtds")
    assert source.url == url
    assert source.debian_jar == ("/usr/share/java/jtds.jar", "libjtds-java")


@pytest.mark.parametrize(("settings", "driver", "message"), [
    (mssql(options={"dsn": "shopdsn"}), "mssql-jdbc", "OPTIONS['dsn'] cannot be used by JDBC"),
    (mssql(extra="ColumnEncryption=Enabled"), "mssql-jdbc", "ODBC keywords columnencryption"),
    (mssql(extra="Encrypt=perhaps"), "mssql-jdbc", "encrypt='perhaps' is not yes or no"),
    (mssql(extra="Encrypt=strict"), "jtds", "Encrypt=strict (TDS 8) is not supported by jTDS"),
    (mssql(USER=""), "jtds", "jTDS needs USER and PASSWORD"),
    (mssql(extra="Authentication=ActiveDirectoryPassword"), "jtds", "authentication has no jTDS"),
    (mssql(extra="Encrypt"), "mssql-jdbc", "is not a list of ODBC KEY=value pairs"),
])
def test_mssql_settings_jdbc_cannot_express_are_errors(
        settings: dict[str, Any], driver: str, message: str) -> None:
    with pytest.raises(JdbcSettingsError, match=re.escape(message)):
        jdbc_source(settings, "microsoft", sqlserver_driver=driver)


def test_odbc_keywords_with_braces_and_spaces() -> None:
    assert parse_odbc_keywords(" Encrypt = yes ; PWD={a;b}}c} ;App=x;") == {
        "encrypt": "yes", "pwd": "a;b}c", "app": "x"}


def test_other_vendors_urls_come_from_their_database_entries(tmp_path: Path) -> None:
    postgres = jdbc_source({"NAME": "shop", "USER": "u", "PASSWORD": "", "HOST": "pg",
                            "PORT": "5433", "OPTIONS": {"sslmode": "require",
                                                        "options": "-c search_path=app"}},
                           "postgresql")
    assert postgres.url == ("jdbc:postgresql://pg:5433/shop?sslmode=require"
                            "&options=-c%20search_path%3Dapp")
    assert postgres.debian_jar == ("/usr/share/java/postgresql.jar", "libpostgresql-jdbc-java")
    mariadb = jdbc_source({"NAME": "shop", "USER": "root", "PASSWORD": "", "HOST": "",
                           "PORT": "", "OPTIONS": {"unix_socket": "/run/mysqld/mysqld.sock"}},
                          "mysql")
    assert mariadb.url == ("jdbc:mysql://localhost:3306/shop?permitMysqlScheme=true"
                           "&localSocket=/run/mysqld/mysqld.sock")
    assert mariadb.driver_class == "org.mariadb.jdbc.Driver"
    sqlite = jdbc_source({"NAME": str(tmp_path / "db.sqlite3")}, "sqlite")
    assert sqlite.url == f"jdbc:sqlite:{tmp_path / 'db.sqlite3'}" and sqlite.properties == {}
    with pytest.raises(JdbcSettingsError, match="in-memory SQLite database"):
        jdbc_source({"NAME": ":memory:"}, "sqlite")
    with pytest.raises(JdbcSettingsError, match="is a Unix socket"):
        jdbc_source({"NAME": "x", "HOST": "/var/run/postgresql"}, "postgresql")
    with pytest.raises(JdbcSettingsError, match=r"my\.cnf"):
        jdbc_source({"NAME": "x", "OPTIONS": {"read_default_file": "/etc/my.cnf"}}, "mysql")


@pytest.mark.parametrize(("spark", "message"), [
    ("local", "EVENTFERRY['SPARK'] is 'local'; it must be a dict"),
    ({"MASTERS": "local"}, "EVENTFERRY['SPARK'] has unknown keys ['MASTERS']"),
    ({"MASTER": ""}, "EVENTFERRY['SPARK'] MASTER is ''"),
    ({"MASTER": "spark://master"}, "EVENTFERRY['SPARK'] MASTER is 'spark://master'"),
    ({"MASTER": 7077}, "EVENTFERRY['SPARK'] MASTER is 7077"),
    ({"JARS": "/usr/share/java/postgresql.jar"}, "JARS is '/usr/share/java/postgresql.jar'"),
    ({"CONF": {"spark.executor.memory": ["2g"]}}, "CONF is {'spark.executor.memory': ['2g']}"),
    ({"CONF": {"spark.jars": "x.jar"}}, "CONF sets 'spark.jars', which SPARK['JARS'] decides"),
    ({"SQLSERVER_DRIVER": "odbc"}, "SQLSERVER_DRIVER is 'odbc'"),
])
def test_bad_spark_settings_are_system_check_errors(spark: Any, message: str) -> None:
    from django.test import override_settings

    with override_settings(EVENTFERRY={"SPARK": spark}):
        errors = [(m.id, m.msg) for m in check_settings()]
    assert any(check_id == "eventferry.E060" and message in text for check_id, text in errors), errors


@pytest.mark.parametrize("value", ["iceberg", "Delta", None, 1])
def test_an_unknown_archive_format_is_a_system_check_error(value: Any) -> None:
    from django.test import override_settings

    with override_settings(EVENTFERRY={"ARCHIVE_FORMAT": value}):
        errors = [(m.id, m.msg) for m in check_settings()]
    assert errors == [("eventferry.E065", f"EVENTFERRY['ARCHIVE_FORMAT'] is {value!r}; it must "
                       "be one of parquet, delta.")]


def test_the_archive_format_setting_is_the_default_of_outbox_archive() -> None:
    from django.test import override_settings

    from eventferry_django.conf import get_settings

    assert get_settings().archive_format == "parquet"
    with override_settings(EVENTFERRY={"ARCHIVE_FORMAT": "delta"}):
        assert get_settings().archive_format == "delta"


def test_a_configured_jar_that_does_not_exist_is_a_system_check_error() -> None:
    from django.test import override_settings

    with override_settings(EVENTFERRY={"SPARK": {"JARS": ["/opt/jdbc/missing.jar",
                                                          "hdfs://cluster/jdbc.jar"]}}):
        errors = [(m.id, m.msg) for m in check_settings()]
    assert errors == [("eventferry.E061", "EVENTFERRY['SPARK']['JARS'] names "
                       "/opt/jdbc/missing.jar, which does not exist.")]


def test_spark_settings_parse_with_defaults() -> None:
    parsed, problems = parse({"SPARK": {"CONF": {"spark.sql.shuffle.partitions": 8,
                                                 "spark.eventLog.enabled": True}}})
    assert problems == []
    assert parsed.spark == SparkConfig(master="local[*]", jars=None, sqlserver_driver="mssql-jdbc",
                                       conf={"spark.sql.shuffle.partitions": "8",
                                             "spark.eventLog.enabled": "true"})
    assert parse({})[0].spark == SparkConfig()


def test_a_missing_jar_names_the_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    source = jdbc_source({"NAME": "x", "HOST": "h"}, "postgresql")
    monkeypatch.setitem(jdbc.DEBIAN_JARS, "postgresql",
                        ("/nonexistent/postgresql.jar", "libpostgresql-jdbc-java"))
    with pytest.raises(MissingPrerequisite, match="apt-get install libpostgresql-jdbc-java"):
        session.jdbc_jars(SparkConfig(), source)
    with pytest.raises(MissingPrerequisite, match=r"names /nope\.jar, which does not exist"):
        session.jdbc_jars(SparkConfig(jars=("/nope.jar",)), source)
    mssql_source = jdbc_source(mssql(), "microsoft")
    with pytest.raises(MissingPrerequisite, match=r"com\.microsoft\.sqlserver:mssql-jdbc:"):
        session.jdbc_jars(SparkConfig(), mssql_source)
    assert session.jdbc_jars(SparkConfig(conf={"spark.jars.packages": "x:y:1"}),
                             mssql_source) == []


def test_a_missing_java_names_the_debian_package(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MissingPrerequisite, match="apt-get install openjdk-17-jre-headless"):
        session.java_version()
    old_java = tmp_path / "java"
    old_java.write_text('#!/bin/sh\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    old_java.chmod(0o755)
    with pytest.raises(MissingPrerequisite, match="is Java 11; Spark needs Java 17 or newer"):
        session.java_version()


def test_without_pyspark_the_app_imports_checks_pass_and_commands_say_what_to_install() -> None:
    """A child interpreter in which pyspark (and matplotlib) cannot be imported."""
    script = (
        "import sys\n"
        "sys.modules['pyspark'] = None\n"
        "sys.modules['matplotlib'] = None\n"
        "import django\n"
        "django.setup()\n"
        "from django.core.management import call_command\n"
        "import eventferry_django.tasks, eventferry_django.history.archive\n"
        "call_command('check')\n"
        "for name in ('outbox_archive', 'outbox_replay', 'outbox_report'):\n"
        "    try:\n"
        "        call_command(name, '--help')\n"
        "    except SystemExit:\n"
        "        pass\n"
        "from eventferry_django.history.session import require_pyspark\n"
        "require_pyspark()\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "EVENTFERRY_TEST_DB": "sqlite"}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert "System check identified no issues" in done.stdout
    assert "--to PATH" in done.stdout and "--from PATH" in done.stdout and "--live" in done.stdout
    assert "pyspark is not installed: pip install 'eventferry-django[spark]'" in done.stderr


def history_imports() -> dict[str, set[str]]:
    """Each module of the history package and the package's modules it imports, at the
    top or inside a function."""
    package = ROOT / "eventferry_django" / "history"
    modules = {path.stem for path in package.glob("*.py")} - {"__init__"}
    imports: dict[str, set[str]] = {}
    for name in modules:
        tree = ast.parse((package / f"{name}.py").read_text(encoding="utf-8"))
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                targets = [node.module] if node.module else [a.name for a in node.names]
                found |= {t.split(".")[0] for t in targets} & modules
        imports[name] = found
    return imports


def test_the_history_modules_import_each_other_without_a_cycle() -> None:
    imports = history_imports()
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import cycle: {' -> '.join((*path, name))}"
        if name in done:
            return
        for target in sorted(imports[name]):
            visit(target, (*path, name))
        done.add(name)

    assert imports["report_files"] == {"figures"}
    for name in sorted(imports):
        visit(name, ())
