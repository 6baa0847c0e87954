"""Settings for the soak's processes (writers, relays, the orchestrator).

The soak starts private servers on ports it picks and hands them over in the environment:
``EVENTFERRY_SOAK_VENDOR`` (postgres or mariadb), ``EVENTFERRY_SOAK_DB_PORT``,
``EVENTFERRY_SOAK_AMQP`` and ``EVENTFERRY_SOAK_EVENTFERRY`` (the EVENTFERRY dict as JSON).
"""

import json
import os

SECRET_KEY = "eventferry-soak"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "eventferry_django", "benchmarks.benchapp"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

VENDOR = os.environ.get("EVENTFERRY_SOAK_VENDOR", "postgres")
_port = os.environ.get("EVENTFERRY_SOAK_DB_PORT", "5432" if VENDOR == "postgres" else "3306")
_host = os.environ.get("EVENTFERRY_SOAK_DB_HOST", "127.0.0.1")
if VENDOR == "postgres":
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.postgresql", "NAME": "soak", "USER": "postgres",
        "HOST": _host, "PORT": _port,
        # A relay is a long-running process: keep its connection between passes.
        "CONN_MAX_AGE": None,
    }}
else:
    import pymysql

    pymysql.install_as_MySQLdb()
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.mysql", "NAME": "soak", "USER": "root",
        "HOST": _host, "PORT": _port, "CONN_MAX_AGE": None,
        "OPTIONS": {"charset": "utf8mb4"},
    }}

AMQP_URL = os.environ.get("EVENTFERRY_SOAK_AMQP", "amqp://guest:guest@127.0.0.1:5672//")
EXCHANGE = "eventferry_soak"
QUEUE = "eventferry_soak"
EVENTFERRY = json.loads(os.environ.get("EVENTFERRY_SOAK_EVENTFERRY", "{}"))
EVENTFERRY.setdefault("PUBLISHER", {
    "BACKEND": "eventferry_django.publishers.kombu.KombuPublisher",
    "OPTIONS": {"url": AMQP_URL, "exchange": EXCHANGE},
})
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "handlers": {"console": {"class": "logging.StreamHandler"}},
           "root": {"level": "WARNING", "handlers": ["console"]}}
