"""Settings of the example shop. Everything that differs between machines comes from
environment variables, all prefixed ``SHOP_``:

``SHOP_DATABASE_URL``
    Where the shop keeps its orders *and* its outbox (they must share a database for
    ``publish_event`` to commit with the order). Default: SQLite in
    ``example_project/db.sqlite3``. Accepted forms::

        sqlite:///relative/path.sqlite3   sqlite:////absolute/path.sqlite3
        postgres://USER:PASSWORD@HOST:5432/NAME              (pip install "psycopg[binary]")
        mariadb://USER:PASSWORD@HOST:3306/NAME  or mysql://  (mysqlclient, or PyMySQL)
        mssql://USER:PASSWORD@HOST:1433/NAME?driver=ODBC+Driver+18+for+SQL+Server&TrustServerCertificate=yes

    SQL Server goes through mssql-django (``pip install "eventferry-django[mssql]"``,
    ENGINE ``"mssql"``) and Microsoft's ODBC driver; ``driver`` defaults to "ODBC Driver 18
    for SQL Server" and every other query parameter is passed on in ``extra_params``
    (``Encrypt=yes``, ``TrustServerCertificate=yes``...). Consider turning on RCSI
    (``ALTER DATABASE shop SET READ_COMMITTED_SNAPSHOT ON``, already the default on Azure
    SQL): the order list and the admin then read committed versions instead of waiting on
    the rows the relay and the views hold locked. The relay is correct either way: its
    claim asks for locking reads (``READCOMMITTEDLOCK``) explicitly.

``SHOP_BROKER_URL``
    The broker the outbox publishes to and the consumer reads from. Default ``memory://localhost/``,
    kombu's in-process transport: only useful when publisher and consumer share a process,
    as in ``demo.py``. For a real deployment: ``amqp://guest:guest@localhost:5672//``.

``SHOP_KAFKA_SERVERS``
    Kafka's bootstrap servers (``host:port,...``): the outbox publishes to Kafka instead,
    with ``KafkaPublisher``, one topic per event topic (``order.created``,
    ``order.paid``), keyed by order. ``make demo BROKER=kafka`` starts a broker of its
    own and sets it (pip install "eventferry-django[kafka]").

``SHOP_EMAIL_BACKEND``
    Where receipts go (Django's ``EMAIL_BACKEND``). Default: the console.

``SHOP_DJANGO_APPS_FROM_MODELS`` (``1``)
    Only for the T-SQL endpoint (Babelfish): see ``MIGRATION_MODULES`` below.

``SHOP_DEBUG`` (``1``), ``SHOP_SECRET_KEY``, ``SHOP_ALLOWED_HOSTS`` (comma-separated)
    The usual Django knobs, with development defaults.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import django
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("SHOP_SECRET_KEY", "example-shop-not-a-secret")
DEBUG = os.environ.get("SHOP_DEBUG", "1") == "1"
ALLOWED_HOSTS = os.environ.get("SHOP_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "eventferry_django",
    "orders",
]
if django.VERSION < (6, 0):
    # Django's Tasks framework, backported (eventferry-django[tasks]); built in from 6.0.
    INSTALLED_APPS.append("django_tasks")
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
ROOT_URLCONF = "shop.urls"
WSGI_APPLICATION = "shop.wsgi.application"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
STATIC_URL = "static/"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


def database_from_url(url: str) -> dict[str, Any]:
    """A ``DATABASES`` entry for ``url``; see the module docstring for the forms."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    query = dict(parse_qsl(parts.query))
    server = {
        "NAME": unquote(parts.path.lstrip("/")) or "shop",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "localhost",
    }
    if scheme == "sqlite":
        # sqlite:///shop.sqlite3 is relative, sqlite:////tmp/shop.sqlite3 absolute.
        name = parts.path[1:] if parts.path.startswith("/") else parts.path
        options: dict[str, Any] = {"timeout": 20}
        if django.VERSION >= (5, 1):
            # Take the write lock at BEGIN: the consumer and the relay write concurrently,
            # and a transaction that upgrades a read lock can fail at once with "locked".
            options["transaction_mode"] = "IMMEDIATE"
        return {"ENGINE": "django.db.backends.sqlite3",
                "NAME": str(BASE_DIR / name) if name and not name.startswith("/") else name,
                "OPTIONS": options}
    if scheme in {"postgres", "postgresql"}:
        return {"ENGINE": "django.db.backends.postgresql", **server,
                "PORT": str(parts.port or 5432)}
    if scheme in {"mysql", "mariadb"}:
        try:
            import MySQLdb  # noqa: F401  (mysqlclient, preferred)
        except ImportError:
            import pymysql

            pymysql.install_as_MySQLdb()
        return {"ENGINE": "django.db.backends.mysql", **server, "PORT": str(parts.port or 3306),
                "OPTIONS": {"charset": "utf8mb4"}}
    if scheme == "mssql":
        driver = query.pop("driver", "ODBC Driver 18 for SQL Server")
        return {"ENGINE": "mssql", **server, "PORT": str(parts.port or 1433),
                "OPTIONS": {"driver": driver,
                            "extra_params": ";".join(f"{k}={v}" for k, v in query.items())}}
    raise ImproperlyConfigured(
        f"SHOP_DATABASE_URL {url!r}: unknown scheme {scheme!r}; use sqlite, postgres, "
        "mariadb (or mysql) or mssql."
    )


DATABASES = {"default": {
    **database_from_url(os.environ.get("SHOP_DATABASE_URL", "sqlite:///db.sqlite3")),
    # Each view runs in one transaction: the order and its outbox event commit together.
    "ATOMIC_REQUESTS": True,
}}

# Django's own apps from their models instead of their migrations (``migrate`` then
# creates their tables as ``--run-syncdb`` does). Only for the T-SQL endpoint of the
# development machines (Babelfish, not SQL Server), which refuses the ``ALTER COLUMN ...
# NULL`` of contenttypes' and auth's migrations; SQL Server needs none of it.
if os.environ.get("SHOP_DJANGO_APPS_FROM_MODELS") == "1":
    MIGRATION_MODULES = {app: None for app in ("admin", "auth", "contenttypes", "sessions")}

BROKER_URL = os.environ.get("SHOP_BROKER_URL", "memory://localhost/")

EVENTFERRY = {
    "PUBLISHER": {
        "BACKEND": "eventferry_django.publishers.kombu.KombuPublisher",
        # A durable topic exchange; the routing key is the event's topic.
        "OPTIONS": {"url": BROKER_URL, "exchange": "shop"},
    },
    # Quick retries so that the demo's unroutable event goes dead within a second. In
    # production keep the defaults (5 attempts, 1 s doubling up to 5 minutes): a queue
    # bound a few minutes late should not cost an event.
    "MAX_ATTEMPTS": 3,
    "BACKOFF": {"BASE": 0.05, "MAX": 0.2, "JITTER": 0.0},
}
KAFKA_SERVERS = os.environ.get("SHOP_KAFKA_SERVERS", "")
if KAFKA_SERVERS:
    EVENTFERRY["PUBLISHER"] = {
        "BACKEND": "eventferry_django.publishers.kafka.KafkaPublisher",
        # The record's topic is the event's; its key the order, so an order's events
        # keep their order on one partition. Topics are not created on demand: one that
        # does not exist makes the event dead, as an unroutable one is on RabbitMQ.
        "OPTIONS": {"bootstrap_servers": KAFKA_SERVERS,
                    "producer": {"allow.auto.create.topics": False},
                    "delivery_timeout": 4},
    }

# Django tasks (orders/tasks.py: the receipt email) go through the outbox: enqueued in the
# view's transaction, delivered by the same relay to the shop's Celery workers.
TASKS = {"default": {
    "BACKEND": "eventferry_django.task_backend.OutboxTaskBackend",
    "OPTIONS": {"celery_app": "shop.celery.app"},
}}
EMAIL_BACKEND = os.environ.get("SHOP_EMAIL_BACKEND",
                               "django.core.mail.backends.console.EmailBackend")

# Celery (shop/celery.py reads every CELERY_* setting). The worker runs the order-events
# consumer (orders.consumers) as a bootstep; beat may run the relay instead of a
# long-running `manage.py outbox_relay`.
CELERY_BROKER_URL = BROKER_URL
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = False
# Its own queue for tasks (beat's relay and purge, the Django tasks' runner), not
# Celery's shared default "celery".
CELERY_TASK_DEFAULT_QUEUE = "shop.tasks"
CELERY_TASK_IGNORE_RESULT = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BEAT_SCHEDULE = {
    "eventferry-relay": {"task": "eventferry.relay", "schedule": 5.0},
    "eventferry-purge": {"task": "eventferry.purge", "schedule": 3600.0,
                         "kwargs": {"older_than": "7d"}},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # stdout, as a container platform collects it; the relay's start-up line, retries,
    # dead events and progress come from the eventferry_django.* loggers.
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain",
                             "stream": "ext://sys.stdout"}},
    "loggers": {
        "orders": {"handlers": ["console"], "level": os.environ.get("SHOP_LOG_LEVEL", "INFO")},
        "eventferry_django": {"handlers": ["console"], "propagate": False,
                              "level": os.environ.get("SHOP_LOG_LEVEL", "INFO")},
        # Django 6.0's django.tasks logs every task's start and finish at INFO, and its
        # parent "django" logger's INFO level lets them through to the Celery worker's
        # root handler on stderr; the backport's django_tasks logger stays quiet there.
        # Failures (ERROR) still show.
        "django.tasks": {"level": "WARNING"},
    },
}
