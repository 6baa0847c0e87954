"""Chains through real relay processes and the real RabbitMQ.

- One hot aggregate, 5,000 events, two relays; one is killed (SIGKILL) while it holds a
  chain and the broker connection is cut (TCP proxy) mid-stream: every event arrives,
  the first delivery of each message id comes in id order, only the killed chain spent
  an attempt, and no two relays ever had rows of the aggregate in flight at once
  (sampled from the journal of batches in flight while the relays ran).
- A chain whose middle message is unroutable: the rows before and after it are done,
  one order break is counted and logged, the refused row follows the retry/dead path.
"""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction  # noqa: F401 (skipif strings)

from eventferry_django import NewEvent, publish_events
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.store.in_flight_journal import InFlightJournal

from . import test_relay_rabbitmq as rabbit
from .amqp import TopicQueue, proxied_url
from .engine_gaps import babelfish_gap
from .tcp_proxy import TcpProxy
from .test_relay_rabbitmq import (
    Relays,
    all_settled,
    assert_in_order_per_aggregate,
    broker_errors,
    publish,
    relay_settings,
    statuses,
    wait_until,
)

# The fixtures of the relay tests: a broker, a queue per test, a TCP proxy, relay processes.
amqp_url, topic_queue, proxy, relays = rabbit.amqp_url, rabbit.topic_queue, rabbit.proxy, rabbit.relays

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MAX_CHAIN = 100
CLAIM_TIMEOUT = 3.0


class LeaseWatch:
    """Samples the journal of batches in flight: per aggregate, which relays have its
    rows in flight. More than one would mean two relays own the aggregate at once."""

    def __init__(self) -> None:
        self.samples = 0
        self.held = 0

    def sample(self) -> None:
        # No aggregate is ever in two relays' batches in flight: a relay that takes a
        # killed relay's bucket sweeps it out of that relay's batches in the same
        # transaction, before it claims there.
        journal = InFlightJournal().entries()
        ids = {i: entry.relay for entry in journal for i in entry.ids}
        relays: dict[str, set[str]] = {}
        for row_id, aggregate in (OutboxEvent.objects.filter(id__in=list(ids))
                                  .values_list("id", "aggregate_id")):
            relays.setdefault(aggregate, set()).add(ids[row_id])
        self.samples += 1
        for aggregate, holders in relays.items():
            self.held += 1
            assert len(holders) == 1, f"{sorted(holders)} hold {aggregate} at once"

    def until(self, condition: Callable[[], bool]) -> Callable[[], bool]:
        def check() -> bool:
            self.sample()
            return condition()
        return check


def chain_settings(url: str, exchange: str, **extra: Any) -> dict[str, Any]:
    settings = relay_settings(url, exchange, batch_size=200, connect_timeout=1,
                              publish_timeout=2, **extra)
    settings.update(MAX_CHAIN=MAX_CHAIN, CLAIM_TIMEOUT=CLAIM_TIMEOUT)
    return settings


def done() -> int:
    return OutboxEvent.objects.done().count()


@babelfish_gap("slow-start-up", "a relay process's first claim compiles for seconds there, past the test's 90 s wait for the relays to take over")
@pytest.mark.skipif("connection.vendor == 'sqlite'", reason="SQLite runs one relay")
def test_a_hot_aggregate_through_two_relays_a_kill_and_a_broker_cut_keeps_id_order(
    amqp_url: str, topic_queue: Callable[..., TopicQueue], relays: Relays, proxy: TcpProxy,
) -> None:
    queue = topic_queue()
    n = 5000
    ids = publish([NewEvent("order.changed", {"aggregate": "hot", "seq": seq}, "order", "hot")
                   for seq in range(n)])
    settings = chain_settings(proxied_url(amqp_url, proxy), queue.exchange)
    watch = LeaseWatch()

    victim = relays.start(settings, "victim", "--poll-interval", "0.1")
    wait_until(watch.until(lambda: done() >= 500
                           and OutboxEvent.objects.in_flight().exists()),
               timeout=60, what="the victim to hold a chain", relays=relays, interval=0.01)
    victim.kill()  # SIGKILL, mid-chain: its rows stay claimed until the lease runs out
    victim.wait(10)
    del relays.running["victim"]

    for relay_id in ("r1", "r2"):
        relays.start(settings, relay_id, "--poll-interval", "0.1")
    wait_until(watch.until(lambda: done() >= 2500), timeout=90,
               what="the relays to take over", relays=relays, interval=0.02)
    proxy.cut()
    wait_until(watch.until(lambda: broker_errors(relays, "r1") + broker_errors(relays, "r2")
                           >= 2), timeout=30, what="the relays to lose the broker",
               relays=relays, interval=0.02)
    proxy.restore()
    wait_until(watch.until(all_settled), timeout=120, what="the rest", relays=relays,
               interval=0.02)
    relays.stop()

    assert watch.held > 0, "no sample saw a claimed row: the check proved nothing"
    rows = statuses()
    # The killed chain was taken back with one attempt each; the broker cut spent none.
    assert set(rows) <= {(Status.DONE, 0), (Status.DONE, 1)}
    assert 1 <= rows[(Status.DONE, 1)] <= MAX_CHAIN
    received = queue.drain()
    assert {got.message_id for got in received} == set(ids)
    assert_in_order_per_aggregate(received, n)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_an_unroutable_message_mid_chain_is_one_order_break(
    amqp_url: str, topic_queue: Callable[..., TopicQueue], relays: Relays,
) -> None:
    queue = topic_queue(binding="order.*")  # nothing for invoice.*
    with transaction.atomic():
        ids = publish_events([
            NewEvent("invoice.sent" if seq == 2 else "order.changed",
                     {"aggregate": "A", "seq": seq}, "order", "A")
            for seq in range(5)
        ])
    settings = chain_settings(amqp_url, queue.exchange, max_attempts=3,
                              backoff={"BASE": 0.05, "MAX": 0.1, "JITTER": 0})
    port = free_port()
    relays.start(settings, "relay", "--poll-interval", "0.1", "--metrics-port", str(port))
    wait_until(all_settled, timeout=30, what="the outbox to settle", relays=relays)
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    summary = relays.stop()["relay"]

    assert 'eventferry_order_breaks_total{topic="invoice.sent"} 1.0' in metrics.decode()
    refused = OutboxEvent.objects.get(message_id=ids[2])
    assert (refused.status, refused.attempts) == (Status.DEAD, 3)
    assert "unroutable" in (refused.last_error or "")
    others = OutboxEvent.objects.exclude(message_id=ids[2])
    assert set(others.values_list("status", "attempts")) == {(Status.DONE, 0)}
    # Delivered in id order but for the refused one, which never arrives.
    received = queue.drain()
    assert [got.message_id for got in received] == [ids[0], ids[1], ids[3], ids[4]]
    log = relays.text("relay")
    assert "order break in aggregate order/A" in log
    first, second, third = (OutboxEvent.objects.get(message_id=m).id for m in ids[2:5])
    assert f"row(s) [{first}] refused, later row(s) [{second}, {third}]" in log
    assert (summary["published"], summary["retried"], summary["dead"]) == (4, 2, 1)
