"""InboxHandler on NATS JetStream: the message id comes from ``Nats-Msg-Id`` (or the
CloudEvent's id); two consumer processes that get the same message at once ship it
once; failures terminate or nak as documented."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from eventferry_django.inbox.nats import Delivery, InboxHandler
from eventferry_django.models import InboxMessage

from .engine_gaps import babelfish_gap
from .inbox_processes import ConsumerProcesses, running
from .nats_broker import Stream, on_server, require_nats
from .relay_process import wait_until
from .testapp.models import Shipment

pytestmark = pytest.mark.django_db(transaction=True)

CONSUMER = [sys.executable, "-m", "tests.inbox_nats_consumer"]
#: JetStream delivers a message again once it has waited this long for its ack.
ACK_WAIT = 1.0


class NatsConsumers(ConsumerProcesses):
    """The consumer processes read one durable pull consumer on a stream of their own,
    with a short ``ack_wait``: a message still being handled after it is delivered
    again, to the other process, while the first one holds its inbox row."""

    def prepare(self) -> str:
        self.url = require_nats()
        self.stream = Stream(self.url)

        async def add_consumer(client: Any) -> None:
            await client.jetstream().add_consumer(
                self.stream.name, durable_name="shipping", ack_policy="explicit",
                ack_wait=ACK_WAIT, max_deliver=2)

        on_server(self.url, add_consumer)
        return "shipping"

    def broker_env(self) -> dict[str, str]:
        return {"EVENTFERRY_NATS_URL": self.url, "EVENTFERRY_TEST_STREAM": self.stream.name}

    def delete_queue(self) -> None:
        self.stream.delete()

    def unacked(self) -> tuple[int, int]:
        """(waiting to be delivered, delivered but not acked) on the durable consumer."""

        async def info(client: Any) -> tuple[int, int]:
            found = await client.jetstream().consumer_info(self.stream.name, self.queue)
            return int(found.num_pending), int(found.num_ack_pending)

        return on_server(self.url, info)


@pytest.fixture(scope="module")
def consumers(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[NatsConsumers]:
    with running(tmp_path_factory.mktemp("nats-consumers"), CONSUMER, NatsConsumers) as made:
        assert isinstance(made, NatsConsumers)
        yield made


@babelfish_gap("locking-hints-ignored", "UPDLOCK, HOLDLOCK on the inbox probe do not serialise: the second consumer fails on the unique key instead of skipping")
@pytest.mark.slow
def test_two_consumers_get_the_same_message_at_once_and_ship_once(
    consumers: NatsConsumers,
) -> None:
    message_id = str(uuid.uuid4())
    body = json.dumps({"reference": "SO-1", "linger": 2.5 * ACK_WAIT}).encode()

    async def publish(client: Any) -> None:
        await client.jetstream().publish(f"{consumers.stream.prefix}.order.paid", body,
                                         headers={"Nats-Msg-Id": message_id})

    on_server(consumers.url, publish)

    consumers.assert_shipped_once(message_id, "SO-1")
    # Both deliveries were acked: nothing waits, nothing is left unacked.
    wait_until(lambda: consumers.unacked() == (0, 0), timeout=10,
               what="the consumer to have no message pending")


# -- one consumer, in this process, on messages as nats-py hands them over --------------

class Msg:
    """A JetStream message as the handler sees it, recording how it was settled."""

    def __init__(self, body: Any, headers: dict[str, str] | None) -> None:
        self.data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.headers = headers
        self.subject = "orders.paid"
        self.settled: list[str] = []

    async def ack(self) -> None:
        self.settled.append("ack")

    async def nak(self) -> None:
        self.settled.append("nak")

    async def term(self) -> None:
        self.settled.append("term")


def ship(body: dict[str, Any], msg: Any) -> None:
    Shipment.objects.create(order_reference=body["reference"])
    if body.get("fail"):
        raise RuntimeError("cannot ship")


def deliver(handler: InboxHandler, msg: Msg) -> Delivery:
    return asyncio.run(handler(msg))


def test_nats_msg_id_deduplicates_and_each_delivery_is_acked() -> None:
    handler = InboxHandler("shipping", ship)
    first, again = (Msg({"reference": "SO-1"}, {"Nats-Msg-Id": "m-1"}) for _ in range(2))
    other = Msg({"reference": "SO-2"}, {"Nats-Msg-Id": "m-2"})
    assert [deliver(handler, m) for m in (first, again, other)] == [
        Delivery.HANDLED, Delivery.DUPLICATE, Delivery.HANDLED]
    assert [m.settled for m in (first, again, other)] == [["ack"]] * 3
    assert sorted(Shipment.objects.values_list("order_reference", flat=True)) == ["SO-1", "SO-2"]


def test_a_cloudevent_is_deduplicated_on_its_own_id() -> None:
    handler = InboxHandler("shipping", ship)
    binary = Msg({"reference": "SO-1"}, {"ce-id": "order%207", "Nats-Msg-Id": "other"})
    structured = Msg({"specversion": "1.0", "id": "order 7", "reference": "SO-1"},
                     {"Content-Type": "application/cloudevents+json"})
    assert [deliver(handler, m) for m in (binary, structured)] == [
        Delivery.HANDLED, Delivery.DUPLICATE]
    assert list(InboxMessage.objects.values_list("message_id", flat=True)) == ["order 7"]


@pytest.mark.parametrize(("body", "headers"), [
    ({"reference": "SO-1"}, None),
    ({"reference": "SO-1"}, {"Nats-Msg-Id": " "}),
    ({"reference": "SO-1"}, {"ce-id": "%C0%A0"}),  # not UTF-8 once decoded
    (b"not json", {"Nats-Msg-Id": "m-1"}),
])
def test_a_message_it_cannot_handle_is_terminated_unhandled(
    body: Any, headers: dict[str, str] | None,
) -> None:
    msg = Msg(body, headers)
    assert deliver(InboxHandler("shipping", ship), msg) is Delivery.REJECTED
    assert msg.settled == ["term"]
    assert not Shipment.objects.exists() and not InboxMessage.objects.exists()


@pytest.mark.parametrize(("requeue_on_error", "delivery", "settled"), [
    (False, Delivery.REJECTED, "term"), (True, Delivery.REQUEUED, "nak"),
])
def test_a_failing_handler_rolls_back_and_terminates_or_naks(
    requeue_on_error: bool, delivery: Delivery, settled: str,
) -> None:
    msg = Msg({"reference": "SO-1", "fail": True}, {"Nats-Msg-Id": "m-1"})
    handler = InboxHandler("shipping", ship, requeue_on_error=requeue_on_error)
    assert deliver(handler, msg) is delivery
    assert msg.settled == [settled]
    assert not Shipment.objects.exists() and not InboxMessage.objects.exists()

