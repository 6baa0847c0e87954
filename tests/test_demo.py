"""``make demo`` end to end: example_project/demo.py in a process of its own, on a fresh
SQLite file in a temporary directory and kombu's in-process broker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
  dead events         1

The poisoned event (order.refunded, unroutable) is dead; see it in the admin:
  http://127.0.0.1:8000/admin/eventferry_django/deadoutboxevent/
  SHOP_DATABASE_URL={url} {python} {manage} createsuperuser
  SHOP_DATABASE_URL={url} {python} {manage} runserver
"""


def test_demo_places_orders_relays_consumes_once_and_buries_the_poison(tmp_path: Path) -> None:
    env = {
        key: value for key, value in os.environ.items()
        # pytest-django's settings module and the suite's own knobs are not the shop's.
        if key != "DJANGO_SETTINGS_MODULE" and not key.startswith(("SHOP_", "EVENTFERRY_"))
    }
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
