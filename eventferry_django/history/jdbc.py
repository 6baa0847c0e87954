"""The JDBC connection of a Django ``DATABASES`` entry: URL, driver class, credentials
and the jar that holds the driver.

Spark reads the outbox through JDBC, and the only configuration is the one Django
already has: the entry of ``EVENTFERRY["DATABASE"]``. Credentials travel as JDBC
properties, never inside the URL, so the URL can be logged.

SQL Server settings are mssql-django's, written for ODBC (``HOST`` may carry an
instance name or a port after a comma; ``OPTIONS["extra_params"]`` holds ODBC keywords
such as ``Encrypt`` and ``TrustServerCertificate``). They are translated to Microsoft's
mssql-jdbc or to jTDS; an ODBC keyword that would change how the connection behaves
and has no JDBC spelling is an error rather than silently dropped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from django.db import connections

from ..conf import get_settings
from .errors import JdbcSettingsError

#: Where Debian's packages put the drivers, and which package to install for each.
DEBIAN_JARS: dict[str, tuple[str, str]] = {
    "postgresql": ("/usr/share/java/postgresql.jar", "libpostgresql-jdbc-java"),
    "mysql": ("/usr/share/java/mariadb-java-client.jar", "libmariadb-java"),
    "sqlite": ("/usr/share/java/sqlite-jdbc.jar", "libxerial-sqlite-jdbc-java"),
    "jtds": ("/usr/share/java/jtds.jar", "libjtds-java"),
}

#: Microsoft's driver has no Debian package; with Maven access Spark fetches it.
MSSQL_JDBC_MAVEN = "com.microsoft.sqlserver:mssql-jdbc:12.8.1.jre11"

DRIVER_CLASSES = {
    "postgresql": "org.postgresql.Driver",
    "mysql": "org.mariadb.jdbc.Driver",
    "sqlite": "org.sqlite.JDBC",
    "jtds": "net.sourceforge.jtds.jdbc.Driver",
    "mssql-jdbc": "com.microsoft.sqlserver.jdbc.SQLServerDriver",
}


@dataclass(frozen=True)
class JdbcSource:
    """How Spark connects to the outbox's database."""

    vendor: str
    driver_name: str
    url: str
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def driver_class(self) -> str:
        return DRIVER_CLASSES[self.driver_name]

    @property
    def debian_jar(self) -> tuple[str, str] | None:
        """(path, package) of the driver's jar from Debian, if Debian packages it."""
        return DEBIAN_JARS.get(self.driver_name)

    def options(self) -> dict[str, str]:
        """Options for ``spark.read.format("jdbc")``: URL, driver and properties."""
        return {"url": self.url, "driver": self.driver_class, **self.properties}


def outbox_source(alias: str | None = None) -> JdbcSource:
    """The JDBC connection of the outbox's database (``EVENTFERRY["DATABASE"]`` unless
    ``alias`` names another)."""
    settings = get_settings()
    connection = connections[alias or settings.database]
    return jdbc_source(connection.settings_dict, connection.vendor,
                       sqlserver_driver=settings.spark.sqlserver_driver)


def jdbc_source(settings_dict: Mapping[str, Any], vendor: str,
                *, sqlserver_driver: str = "mssql-jdbc") -> JdbcSource:
    """The JDBC connection of one ``DATABASES`` entry (``connection.settings_dict``) of
    ``vendor`` (``connection.vendor``)."""
    builders = {
        "postgresql": _postgresql,
        "mysql": _mysql,
        "sqlite": _sqlite,
        "microsoft": _mssql_jdbc if sqlserver_driver == "mssql-jdbc" else _jtds,
    }
    try:
        build = builders[vendor]
    except KeyError:
        raise JdbcSettingsError(f"No JDBC mapping for the {vendor!r} database backend.") from None
    return build(settings_dict)


def _credentials(settings: Mapping[str, Any]) -> dict[str, str]:
    properties = {}
    if settings.get("USER"):
        properties["user"] = str(settings["USER"])
        properties["password"] = str(settings.get("PASSWORD") or "")
    return properties


def _port(settings: Mapping[str, Any], default: int) -> int:
    port = settings.get("PORT") or default
    try:
        return int(port)
    except (TypeError, ValueError):
        raise JdbcSettingsError(f"DATABASES PORT {port!r} is not a port number.") from None


def _host(settings: Mapping[str, Any]) -> str:
    host = str(settings.get("HOST") or "localhost")
    if host.startswith("/"):
        raise JdbcSettingsError(
            f"DATABASES HOST {host!r} is a Unix socket; Spark's JDBC driver connects over "
            "TCP. Give the outbox's database a host name (a second alias pointing at the "
            "same database works: set EVENTFERRY['DATABASE'] to it)."
        )
    return host


def _no_option(options: Mapping[str, Any], key: str, why: str) -> None:
    if options.get(key):
        raise JdbcSettingsError(f"DATABASES OPTIONS[{key!r}] cannot be used by JDBC: {why}")


def _postgresql(settings: Mapping[str, Any]) -> JdbcSource:
    options = settings.get("OPTIONS") or {}
    _no_option(options, "service", "a pg_service.conf entry is libpq's; give HOST, PORT, "
               "NAME, USER and PASSWORD instead.")
    query = {}
    # libpq option names and their pgJDBC spelling; the rest concern psycopg only.
    for libpq, jdbc in (("sslmode", "sslmode"), ("sslrootcert", "sslrootcert"),
                        ("sslcert", "sslcert"), ("sslkey", "sslkey"),
                        ("application_name", "ApplicationName"),
                        ("connect_timeout", "connectTimeout"), ("options", "options")):
        if options.get(libpq) is not None:
            query[jdbc] = str(options[libpq])
    url = f"jdbc:postgresql://{_host(settings)}:{_port(settings, 5432)}/{settings['NAME']}"
    return JdbcSource("postgresql", "postgresql", _with_query(url, query, "?", "&"),
                      _credentials(settings))


def _mysql(settings: Mapping[str, Any]) -> JdbcSource:
    options = settings.get("OPTIONS") or {}
    _no_option(options, "read_default_file", "the client reads my.cnf, JDBC does not; give "
               "HOST, PORT, NAME, USER and PASSWORD in DATABASES.")
    # Spark picks its MySQL dialect (backquoted identifiers) by the jdbc:mysql: prefix;
    # MariaDB's driver takes that scheme (version 3 only with permitMysqlScheme).
    query = {"permitMysqlScheme": "true"}
    host = str(settings.get("HOST") or "localhost")
    socket = options.get("unix_socket") or (host if host.startswith("/") else None)
    if socket:
        query["localSocket"] = str(socket)
        host = "localhost"
    ssl = options.get("ssl")
    if ssl:
        query["useSsl"] = "true"
        if isinstance(ssl, Mapping) and ssl.get("ca"):
            query["serverSslCert"] = str(ssl["ca"])
    url = f"jdbc:mysql://{host}:{_port(settings, 3306)}/{settings['NAME']}"
    return JdbcSource("mysql", "mysql", _with_query(url, query, "?", "&"),
                      _credentials(settings))


def _sqlite(settings: Mapping[str, Any]) -> JdbcSource:
    name = str(settings.get("NAME") or "")
    if not name or name == ":memory:" or "mode=memory" in name:
        raise JdbcSettingsError(
            f"DATABASES NAME {name!r} is an in-memory SQLite database, which no other "
            "process can open; Spark needs a database file."
        )
    if name.startswith("file:"):
        name = name[len("file:"):].split("?", 1)[0]
    return JdbcSource("sqlite", "sqlite", f"jdbc:sqlite:{os.path.abspath(name)}")


# -- SQL Server ------------------------------------------------------------------------

@dataclass(frozen=True)
class SqlServerTarget:
    """Server, instance, port and ODBC keywords of an mssql-django entry."""

    server: str
    instance: str | None
    port: int | None
    database: str
    odbc: Mapping[str, str]  # ODBC keywords, lower-cased keys
    encrypt_by_default: bool


#: ODBC keywords that only tune the ODBC session and have no effect on what Spark reads.
_ODBC_ONLY = frozenset({
    "driver", "mars_connection", "connectretrycount", "connectretryinterval", "keepalive",
    "keepaliveinterval", "autotranslate", "regional", "quotedid", "ansinpw", "wsid",
})

_ODBC_TRUE = {"yes", "true", "1", "mandatory"}
_ODBC_FALSE = {"no", "false", "0", "optional"}


def parse_odbc_keywords(text: str) -> dict[str, str]:
    """``KEY=value;KEY={value; with braces}`` as {lower-case key: value}."""
    keywords: dict[str, str] = {}
    pattern = re.compile(r"\s*([^=;]+?)\s*=\s*(\{(?:[^}]|\}\})*\}|[^;]*)\s*(?:;|$)")
    position = 0
    text = text.strip().strip(";")
    while position < len(text):
        match = pattern.match(text, position)
        if not match or match.end() == position:
            raise JdbcSettingsError(
                f"OPTIONS['extra_params'] {text!r} is not a list of ODBC KEY=value pairs."
            )
        value = match[2].strip()
        if value.startswith("{") and value.endswith("}"):
            value = value[1:-1].replace("}}", "}")
        keywords[match[1].strip().lower()] = value
        position = match.end()
    return keywords


def sqlserver_target(settings: Mapping[str, Any]) -> SqlServerTarget:
    options = settings.get("OPTIONS") or {}
    _no_option(options, "dsn", "an ODBC data source name exists only for ODBC; give "
               "HOST, PORT and NAME instead.")
    host = str(settings.get("HOST") or "localhost").strip()
    if host.lower().startswith("tcp:"):
        host = host[4:]
    port: int | None = None
    if "," in host:
        host, _, port_text = host.partition(",")
        port = _port({"PORT": port_text.strip()}, 1433)
    if settings.get("PORT"):
        port = _port(settings, 1433)
    server, _, instance = host.partition("\\")
    driver = str(options.get("driver") or "ODBC Driver 17 for SQL Server")
    version = re.search(r"ODBC Driver (\d+)", driver)
    return SqlServerTarget(
        server=server.strip(),
        instance=instance.strip() or None,
        port=port,
        database=str(settings.get("NAME") or "master"),
        odbc=parse_odbc_keywords(str(options.get("extra_params") or "")),
        # ODBC Driver 18 encrypts unless told not to; 17 and FreeTDS do not.
        encrypt_by_default=bool(version and int(version[1]) >= 18),
    )


def _odbc_flag(odbc: Mapping[str, str], key: str) -> bool | None:
    value = odbc.get(key)
    if value is None:
        return None
    if value.lower() in _ODBC_TRUE:
        return True
    if value.lower() in _ODBC_FALSE:
        return False
    raise JdbcSettingsError(f"ODBC keyword {key}={value!r} is not yes or no.")


def _encrypt(target: SqlServerTarget) -> str:
    value = target.odbc.get("encrypt")
    if value is not None and value.lower() == "strict":
        return "strict"
    flag = _odbc_flag(target.odbc, "encrypt")
    return "true" if (target.encrypt_by_default if flag is None else flag) else "false"


def _login_timeout(target: SqlServerTarget, settings: Mapping[str, Any]) -> str | None:
    options = settings.get("OPTIONS") or {}
    for key in ("logintimeout", "connection timeout", "timeout"):
        if target.odbc.get(key):
            return target.odbc[key]
    timeout = options.get("connection_timeout")
    return str(timeout) if timeout else None


_MSSQL_JDBC_KEYWORDS = {
    "hostnameincertificate": "hostNameInCertificate",
    "applicationintent": "applicationIntent",
    "app": "applicationName",
    "serverspn": "serverSpn",
}
#: ODBC's Authentication values, spelled as mssql-jdbc spells them.
_AUTHENTICATION = {
    "sqlpassword": "SqlPassword",
    "activedirectorypassword": "ActiveDirectoryPassword",
    "activedirectoryintegrated": "ActiveDirectoryIntegrated",
    "activedirectoryinteractive": "ActiveDirectoryInteractive",
    "activedirectorymsi": "ActiveDirectoryMSI",
    "activedirectoryserviceprincipal": "ActiveDirectoryServicePrincipal",
    "activedirectorydefault": "ActiveDirectoryDefault",
}
_HANDLED = {"encrypt", "trustservercertificate", "logintimeout", "connection timeout",
            "timeout", "multisubnetfailover", "authentication", "trusted_connection"}


def _unsupported(odbc: Mapping[str, str], known: set[str], driver: str) -> None:
    unknown = sorted(set(odbc) - known - _HANDLED - _ODBC_ONLY)
    if unknown:
        raise JdbcSettingsError(
            f"OPTIONS['extra_params'] has ODBC keywords {', '.join(unknown)} that {driver} "
            "has no equivalent for; remove them from the outbox's database entry or point "
            "EVENTFERRY['DATABASE'] at an entry without them."
        )


def _mssql_jdbc(settings: Mapping[str, Any]) -> JdbcSource:
    target = sqlserver_target(settings)
    _unsupported(target.odbc, set(_MSSQL_JDBC_KEYWORDS), "mssql-jdbc")
    server = target.server + (f"\\{target.instance}" if target.instance else "")
    url = f"jdbc:sqlserver://{server}" + (f":{target.port}" if target.port else "")
    query: dict[str, str] = {"databaseName": target.database, "encrypt": _encrypt(target)}
    trust = _odbc_flag(target.odbc, "trustservercertificate")
    if trust is not None:
        query["trustServerCertificate"] = str(trust).lower()
    for odbc_key, jdbc_key in _MSSQL_JDBC_KEYWORDS.items():
        if target.odbc.get(odbc_key):
            query[jdbc_key] = target.odbc[odbc_key]
    failover = _odbc_flag(target.odbc, "multisubnetfailover")
    if failover is not None:
        query["multiSubnetFailover"] = str(failover).lower()
    timeout = _login_timeout(target, settings)
    if timeout:
        query["loginTimeout"] = timeout
    authentication = target.odbc.get("authentication")
    if authentication:
        try:
            query["authentication"] = _AUTHENTICATION[authentication.lower()]
        except KeyError:
            raise JdbcSettingsError(
                f"ODBC Authentication={authentication!r} has no mssql-jdbc equivalent."
            ) from None
    elif not settings.get("USER"):
        # mssql-django falls back to Windows authentication without a USER; on Linux
        # mssql-jdbc does that through Kerberos.
        query["integratedSecurity"] = "true"
        query["authenticationScheme"] = "JavaKerberos"
    return JdbcSource("microsoft", "mssql-jdbc", _with_query(url, query, ";", ";"),
                      _credentials(settings))


def _jtds(settings: Mapping[str, Any]) -> JdbcSource:
    target = sqlserver_target(settings)
    _unsupported(target.odbc, {"app"}, "jTDS")
    for key in ("authentication", "applicationintent", "hostnameincertificate",
                "multisubnetfailover"):
        if target.odbc.get(key):
            raise JdbcSettingsError(
                f"ODBC keyword {key} has no jTDS equivalent; use SPARK['SQLSERVER_DRIVER'] "
                "= 'mssql-jdbc'."
            )
    if not settings.get("USER"):
        raise JdbcSettingsError(
            "jTDS needs USER and PASSWORD (SQL Server authentication); for Windows or "
            "Azure AD authentication use SPARK['SQLSERVER_DRIVER'] = 'mssql-jdbc'."
        )
    encrypt = _encrypt(target)
    if encrypt == "strict":
        raise JdbcSettingsError("Encrypt=strict (TDS 8) is not supported by jTDS; use "
                                "SPARK['SQLSERVER_DRIVER'] = 'mssql-jdbc'.")
    url = f"jdbc:jtds:sqlserver://{target.server}" + (f":{target.port}" if target.port else "")
    url += f"/{target.database}"
    query: dict[str, str] = {}
    if target.instance:
        query["instance"] = target.instance
    if encrypt == "true":
        # "require" encrypts without checking the certificate; "authenticate" checks it.
        trusted = _odbc_flag(target.odbc, "trustservercertificate")
        query["ssl"] = "require" if trusted else "authenticate"
    timeout = _login_timeout(target, settings)
    if timeout:
        query["loginTimeout"] = timeout
    if target.odbc.get("app"):
        query["appName"] = target.odbc["app"]
    return JdbcSource("microsoft", "jtds", _with_query(url, query, ";", ";"),
                      _credentials(settings))


def _jdbc_value(value: str) -> str:
    # mssql-jdbc and jTDS read {braced} values literally, so ; and = may appear in them.
    if any(c in value for c in ";={}"):
        return "{" + value.replace("}", "}}") + "}"
    return value


def _with_query(url: str, query: Mapping[str, str], first: str, separator: str) -> str:
    if not query:
        return url
    quote = _jdbc_value if separator == ";" else _url_value
    return url + first + separator.join(f"{k}={quote(v)}" for k, v in query.items())


def _url_value(value: str) -> str:
    return quote(value, safe="/:.-_")
