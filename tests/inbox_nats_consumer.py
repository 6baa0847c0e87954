"""The NATS counterpart of ``tests/inbox_consumer.py``, run as
``python -m tests.inbox_nats_consumer``: an
:class:`~eventferry_django.inbox.nats.InboxHandler` pulling one message at a time from
the durable consumer ``EVENTFERRY_TEST_QUEUE`` of stream ``EVENTFERRY_TEST_STREAM``
until SIGTERM, tracing as the Celery workers do.
"""

from __future__ import annotations

import asyncio
import os
import signal

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
django.setup()

import nats  # noqa: E402

from eventferry_django.inbox.nats import InboxHandler  # noqa: E402

from .inbox_worker import ship_body, trace  # noqa: E402

#: The Celery workers' task body: traces, ships, lingers in the transaction.
handler = InboxHandler("shipping", lambda body, msg: ship_body(msg.headers["Nats-Msg-Id"],
                                                               body))


async def main() -> None:
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    client = await nats.connect(os.environ["EVENTFERRY_NATS_URL"])
    subscription = await client.jetstream().pull_subscribe_bind(
        os.environ["EVENTFERRY_TEST_QUEUE"], os.environ["EVENTFERRY_TEST_STREAM"])
    trace("ready")
    while not stopping.is_set():
        try:
            messages = await subscription.fetch(1, timeout=0.2)
        except TimeoutError:  # nats.errors.TimeoutError is one
            continue
        for msg in messages:
            message_id = msg.headers.get("Nats-Msg-Id")
            trace("start", task_id=message_id)
            delivery = await handler(msg)
            trace("end", task_id=message_id, outcome=delivery.value)
    await client.close()


if __name__ == "__main__":
    asyncio.run(main())
