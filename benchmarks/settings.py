"""Settings for the benchmarks: PostgreSQL (or, with ``EVENTFERRY_BENCH_VENDOR=mariadb``,
MariaDB) and RabbitMQ on loopback."""

import os

VENDOR = os.environ.get("EVENTFERRY_BENCH_VENDOR", "postgresql")

SECRET_KEY = "eventferry-benchmarks"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "eventferry_django", "benchmarks.benchapp"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {"default": {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": os.environ.get("EVENTFERRY_BENCH_DB", "eventferry_bench"),
    "USER": os.environ.get("PGUSER", "postgres"),
    "HOST": os.environ.get("PGHOST", "127.0.0.1"),
    "PORT": os.environ.get("PGPORT", "5432"),
    # A relay is a long-running process: keep its connection between passes.
    "CONN_MAX_AGE": None,
    "OPTIONS": {"options": "-c synchronous_commit="
                           + os.environ.get("EVENTFERRY_BENCH_SYNC", "on")},
}}
if VENDOR == "mariadb":
    import pymysql

    pymysql.install_as_MySQLdb()
    DATABASES = {"default": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": os.environ.get("EVENTFERRY_BENCH_DB", "eventferry_bench"),
        "USER": os.environ.get("MYSQL_USER", "root"),
        "HOST": os.environ.get("MYSQL_HOST", "127.0.0.1"),
        "PORT": os.environ.get("MYSQL_PORT", "3306"),
        "CONN_MAX_AGE": None,
        "OPTIONS": {"charset": "utf8mb4"},
    }}
AMQP_URL = os.environ.get("EVENTFERRY_BENCH_AMQP", "amqp://guest:guest@127.0.0.1:5672//")
REDIS_URL = os.environ.get("EVENTFERRY_BENCH_REDIS", "redis://127.0.0.1:6379/0")
#: ``redis`` sends the relay's messages to Redis (``benchmarks/relay.py --redis``);
#: ``redis-producer`` too, through kombu's Producer as before the pipeline; ``kafka`` to
#: the Kafka brokers ``EVENTFERRY_BENCH_KAFKA`` names, topic ``EVENTFERRY_BENCH_QUEUE``
#: (``benchmarks/relay.py --kafka``).
BROKER = os.environ.get("EVENTFERRY_BENCH_BROKER", "amqp")
# Its own name lets a MariaDB run share the broker with a PostgreSQL run.
EXCHANGE = QUEUE = os.environ.get("EVENTFERRY_BENCH_QUEUE", "eventferry_bench")
# The relay's defaults (BATCH_SIZE and the rest); benchmarks pass --batch-size to differ.
EVENTFERRY = {
    "PUBLISHER": {
        "BACKEND": "eventferry_django.publishers.kombu.KombuPublisher",
        "OPTIONS": {"url": AMQP_URL, "exchange": EXCHANGE},
    },
}
if BROKER.startswith("redis"):
    EVENTFERRY["PUBLISHER"]["OPTIONS"]["url"] = REDIS_URL
if BROKER == "redis-producer":
    EVENTFERRY["PUBLISHER"]["BACKEND"] = "benchmarks.kombu_producer_path.KombuProducerPathPublisher"
if BROKER == "kafka":
    EVENTFERRY["PUBLISHER"] = {
        "BACKEND": "eventferry_django.publishers.kafka.KafkaPublisher",
        "OPTIONS": {"bootstrap_servers": os.environ.get("EVENTFERRY_BENCH_KAFKA", ""),
                    "topic": QUEUE},
    }
if os.environ.get("EVENTFERRY_BENCH_MAX_CHAIN"):
    EVENTFERRY["MAX_CHAIN"] = int(os.environ["EVENTFERRY_BENCH_MAX_CHAIN"])
if os.environ.get("EVENTFERRY_BENCH_REFUSE"):
    # The poison benchmark (benchmarks/refusing.py): retries come quickly, so the refused
    # message is dead within the drain.
    EVENTFERRY["PUBLISHER"]["BACKEND"] = "benchmarks.refusing.RefusingPublisher"
    EVENTFERRY["BACKOFF"] = {"BASE": 0.25, "MAX": 2.0, "JITTER": 0.2}
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "root": {"level": "WARNING", "handlers": []}}
