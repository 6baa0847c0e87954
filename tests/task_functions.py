"""Django tasks for the task backend's tests, at module level so workers import them by
path. Each writes to the test database, so a test can count what ran."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from asgiref.sync import sync_to_async

from eventferry_django.task_api import task

from .testapp.models import Shipment


@task()
def ship(reference: str, linger: float = 0.0) -> dict[str, Any]:
    """A side effect in the outbox's database: one shipment row per run."""
    Shipment.objects.create(order_reference=reference, handled_by=str(os.getpid()))
    if linger:
        import time

        time.sleep(linger)
    return {"shipped": reference}


@task(takes_context=True)
def ship_slowly_the_first_time(context: Any, reference: str, linger: float) -> dict[str, Any]:
    """:func:`ship`, lingering on its first attempt only: long enough for a test to kill
    the worker running it however slow the machine is, and no longer once run again."""
    Shipment.objects.create(order_reference=reference, handled_by=str(os.getpid()))
    if context.attempt == 1:
        import time

        time.sleep(linger)
    return {"shipped": reference}


@task()
def explode(reason: str) -> None:
    """Fails after writing, so a test sees the write rolled back with the failure."""
    Shipment.objects.create(order_reference=f"exploded-{reason}")
    raise RuntimeError(f"exploded: {reason}")


@task()
def unjsonable() -> object:
    return object()


@task(takes_context=True)
def attempt_number(context: Any) -> int:
    return int(context.attempt)


@task()
async def ship_async(reference: str) -> str:
    await asyncio.sleep(0)
    await sync_to_async(Shipment.objects.create)(order_reference=reference)
    return reference
