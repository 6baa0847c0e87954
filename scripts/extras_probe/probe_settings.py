"""Settings of the project that ``scripts/check_extras.py`` runs ``manage.py check`` in,
inside a clean virtualenv holding eventferry-django with one extra. ``PROBE_EXTRA``
names the extra; each gets a publisher or a database that cannot work without it."""

from __future__ import annotations

import os
from typing import Any

from django.core.exceptions import ImproperlyConfigured

import eventferry_django

EXTRA = os.environ["PROBE_EXTRA"]
# The point is the installed package with only its declared dependencies.
if "site-packages" not in eventferry_django.__file__:
    raise ImproperlyConfigured(f"eventferry_django comes from {eventferry_django.__file__}, "
                               "not from the virtualenv under test")

SECRET_KEY = "extras-probe"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
INSTALLED_APPS = ["django.contrib.contenttypes", "eventferry_django", "probe_app"]
REDIS_URL = os.environ.get("PROBE_REDIS_URL", "redis://127.0.0.1:6379/0")

DATABASES: dict[str, dict[str, Any]] = {"default": {
    "ENGINE": "django.db.backends.sqlite3", "NAME": os.environ["PROBE_SQLITE"]}}
EVENTFERRY: dict[str, Any] = {}

if EXTRA == "kombu":
    EVENTFERRY["PUBLISHER"] = {"BACKEND": "eventferry_django.publishers.kombu.KombuPublisher",
                               "OPTIONS": {"url": REDIS_URL}}
elif EXTRA == "celery":
    EVENTFERRY["PUBLISHER"] = {"BACKEND": "eventferry_django.publishers.celery.CeleryPublisher",
                               "OPTIONS": {"app": "probe_app.tasks.app", "task": "probe.on_event"}}
elif EXTRA == "nats":
    # Its check imports nats-py and connects nowhere.
    EVENTFERRY["PUBLISHER"] = {"BACKEND": "eventferry_django.publishers.nats.NatsPublisher",
                               "OPTIONS": {"servers": "nats://127.0.0.1:4222"}}
elif EXTRA == "kafka":
    # check() asks librdkafka about the producer settings, without connecting.
    EVENTFERRY["PUBLISHER"] = {"BACKEND": "eventferry_django.publishers.kafka.KafkaPublisher",
                               "OPTIONS": {"bootstrap_servers": "127.0.0.1:9092",
                                           "producer": {"linger.ms": 10}}}
elif EXTRA == "tasks":
    # The task backend's checks import the Celery app; the backport's app runs them.
    INSTALLED_APPS.append("django_tasks")
    TASKS = {"default": {"BACKEND": "eventferry_django.task_backend.OutboxTaskBackend",
                         "OPTIONS": {"celery_app": "probe_app.tasks.app"}}}
elif EXTRA == "postgresql":
    DATABASES["default"] = {
        "ENGINE": "django.db.backends.postgresql", "NAME": "postgres",
        "USER": os.environ.get("PGUSER", "postgres"), "PASSWORD": os.environ.get("PGPASSWORD", ""),
        "HOST": os.environ.get("PGHOST", "127.0.0.1"), "PORT": os.environ.get("PGPORT", "5432"),
    }
elif EXTRA == "mysql":
    DATABASES["default"] = {
        "ENGINE": "django.db.backends.mysql", "NAME": "mysql",
        "USER": os.environ.get("MYSQL_USER", "root"),
        "PASSWORD": os.environ.get("MYSQL_PASSWORD", ""),
        "HOST": os.environ.get("MYSQL_HOST", "127.0.0.1"),
        "PORT": os.environ.get("MYSQL_PORT", "3306"),
    }
elif EXTRA == "mssql":
    # Nothing listens there: `check` without --database loads the backend (mssql-django,
    # pyodbc and unixODBC) without connecting.
    DATABASES["default"] = {"ENGINE": "mssql", "NAME": "probe", "HOST": "127.0.0.1",
                            "PORT": "1433", "OPTIONS": {"driver": "ODBC Driver 18 for SQL Server"}}
elif EXTRA == "jsonschema":
    # A topic's JSON Schema is checked against its metaschema, which needs jsonschema.
    EVENTFERRY["TOPICS"] = {"probe.event": {"JSON_SCHEMA": {"type": "object"}}}
elif EXTRA == "prometheus":
    INSTALLED_APPS.insert(0, "django_prometheus")
