"""KafkaPublisher: its OPTIONS checks, and against a real Kafka-protocol broker (Tansu,
started by the tests on a free port, ``tests/kafka_broker.py``):

- a batch arrives keyed by partition key, in order, with its headers; a message Kafka
  can never take (too large, an invalid or unknown topic) is dead with the reason, the
  others go through; a full local queue is drained, not failed; no broker at all is an
  outage, found without waiting for the delivery timeout;
- CloudEvents in both modes, read back with the CloudEvents SDK's Kafka binding;
- a real ``outbox_relay`` process: 2,000 events over 20 aggregates reach Kafka keyed by
  aggregate, in order per key, each once; the broker stopped mid-drain costs no
  attempt and loses nothing; an oversized event goes dead with the reason.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cloudevents.core.bindings.kafka import KafkaMessage, from_binary, from_structured
from cloudevents.core.formats.json import JSONFormat
from django.test import override_settings

from eventferry_django import NewEvent
from eventferry_django.exceptions import ConfigurationError
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.publishers import kafka as kafka_options
from eventferry_django.publishers.base import BrokerUnavailable, OutboundMessage, Outcome
from eventferry_django.publishers.kafka import KafkaPublisher, kafka_headers
from eventferry_django.publishers.message_format import (
    CLOUDEVENTS_JSON,
    KAFKA_BINDING,
    MessageFormat,
)

from . import test_relay_rabbitmq as rabbit
from .kafka_broker import Record, TansuBroker, free_port, running_broker, unique_topic
from .test_publishers import ids_and_messages, message
from .test_relay_rabbitmq import Relays, all_settled, cut_mid_drain, publish, statuses, wait_until

SERVERS = "127.0.0.1:9092"
SOURCE = "https://shop.example.com/orders"
CREATED = dt.datetime(2026, 11, 25, 9, 30, 15, 123000, tzinfo=dt.UTC)
KAFKA_PUBLISHER = "eventferry_django.publishers.kafka.KafkaPublisher"

# The relay tests' fixture: relay processes, each with its own log, killed at teardown.
relays = rabbit.relays


# -- check() ------------------------------------------------------------------------


def test_valid_options_pass() -> None:
    assert KafkaPublisher.check({"bootstrap_servers": SERVERS}) == []
    assert KafkaPublisher.check({
        "bootstrap_servers": ["k1:9092", "k2:9092"], "topic": "orders.{aggregate_type}",
        "producer": {"acks": "all", "enable.idempotence": "true", "linger.ms": 20,
                     "compression.type": "lz4", "max.in.flight.requests.per.connection": 5},
        "delivery_timeout": 12.5,
    }) == []
    assert KafkaPublisher.check({"bootstrap_servers": SERVERS, "topic": "all-events",
                                 "producer": {"acks": -1}}) == []


@pytest.mark.parametrize(("options", "check_id", "named"), [
    ({}, "eventferry.E070", "OPTIONS['bootstrap_servers'] is None: the Kafka brokers are required"),
    ({"bootstrap_servers": " "}, "eventferry.E070", "'bootstrap_servers'"),
    ({"bootstrap_servers": SERVERS, "topics": "x"}, "eventferry.E071", "'topics'"),
    ({"bootstrap_servers": 9092}, "eventferry.E072", "OPTIONS['bootstrap_servers'] is 9092"),
    ({"bootstrap_servers": ["k1:9092", ""]}, "eventferry.E072", "'host:port'"),
    ({"bootstrap_servers": SERVERS, "topic": "{topic}.{tenant}"}, "eventferry.E072", "'tenant'"),
    ({"bootstrap_servers": SERVERS, "topic": "{}"}, "eventferry.E072", "OPTIONS['topic']"),
    ({"bootstrap_servers": SERVERS, "topic": "orders/eu"}, "eventferry.E072",
     "not a valid Kafka topic name"),
    ({"bootstrap_servers": SERVERS, "topic": 5}, "eventferry.E072", "OPTIONS['topic'] is 5"),
    ({"bootstrap_servers": SERVERS, "delivery_timeout": 0}, "eventferry.E072",
     "OPTIONS['delivery_timeout'] is 0"),
    ({"bootstrap_servers": SERVERS, "producer": "acks=all"}, "eventferry.E074",
     "must be a dict of librdkafka producer settings"),
    ({"bootstrap_servers": SERVERS, "producer": {"acks": 1}}, "eventferry.E074",
     "'acks' = 1: only 'all' (-1) is accepted"),
    ({"bootstrap_servers": SERVERS, "producer": {"request.required.acks": "0"}},
     "eventferry.E074", "'request.required.acks' = '0'"),
    ({"bootstrap_servers": SERVERS, "producer": {"enable.idempotence": False}},
     "eventferry.E074", "'enable.idempotence' = False"),
    ({"bootstrap_servers": SERVERS, "producer": {"enable.idempotence": "false"}},
     "eventferry.E074", "cannot be turned off"),
    ({"bootstrap_servers": SERVERS, "producer": {"max.in.flight.requests.per.connection": 6}},
     "eventferry.E074", "must be 1 to 5"),
    ({"bootstrap_servers": SERVERS, "producer": {"max.in.flight": "10"}},
     "eventferry.E074", "'max.in.flight' = '10'"),
    ({"bootstrap_servers": SERVERS, "producer": {"transactional.id": "relay"}},
     "eventferry.E074", "does not use transactions"),
    ({"bootstrap_servers": SERVERS, "producer": {"bootstrap.servers": "k9:9092"}},
     "eventferry.E074", "'bootstrap.servers' repeats OPTIONS['bootstrap_servers']"),
    ({"bootstrap_servers": SERVERS, "producer": {"metadata.broker.list": "k9:9092"}},
     "eventferry.E074", "'metadata.broker.list' repeats"),
    ({"bootstrap_servers": SERVERS, "producer": {"message.timeout.ms": 1000}},
     "eventferry.E074", "set OPTIONS['delivery_timeout']"),
    ({"bootstrap_servers": SERVERS, "producer": {"error_cb": print}},
     "eventferry.E074", "'error_cb' names a callback"),
    ({"bootstrap_servers": SERVERS, "producer": {"on_delivery": "x"}},
     "eventferry.E074", "'on_delivery' names a callback"),
    ({"bootstrap_servers": SERVERS, "producer": {"linger.ms": [5]}},
     "eventferry.E074", "a librdkafka setting is a string, number or boolean"),
    ({"bootstrap_servers": SERVERS, "producer": {"lingr.ms": 5}},
     "eventferry.E072", "librdkafka refuses it: No such configuration property: \"lingr.ms\""),
    ({"bootstrap_servers": SERVERS, "producer": {"compression.type": "zip"}},
     "eventferry.E072", "librdkafka refuses it"),
])
def test_check_names_the_bad_option(options: dict[str, Any], check_id: str, named: str) -> None:
    found = ids_and_messages(KafkaPublisher.check(options))
    assert len(found) == 1, found
    assert found[0][0] == check_id
    assert named in found[0][1]
    with pytest.raises(ConfigurationError, match="KafkaPublisher"):
        KafkaPublisher(**options)


def test_check_reports_every_setting_that_breaks_a_guarantee_and_hides_secrets() -> None:
    [found] = KafkaPublisher.check({"bootstrap_servers": SERVERS, "producer": {
        "acks": 0, "enable.idempotence": False, "sasl.password": "s3cret"}})
    assert found.id == "eventferry.E074"
    assert "'acks' = 0" in found.msg and "'enable.idempotence' = False" in found.msg
    assert "s3cret" not in found.msg and "'sasl.password': '****'" in found.msg


def test_check_without_confluent_kafka(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    found = KafkaPublisher.check({"bootstrap_servers": SERVERS})
    assert [m.id for m in found] == ["eventferry.E073"]
    assert found[0].hint == 'pip install "eventferry-django[kafka]"'


def test_defaults_come_from_the_option_table() -> None:
    publisher = KafkaPublisher(bootstrap_servers=SERVERS)
    assert publisher.options == {**kafka_options.OPTIONS.defaults(), "bootstrap_servers": SERVERS}
    assert publisher.settings.delivery_timeout == kafka_options.OPTIONS["delivery_timeout"].default
    assert publisher.settings.topic is None and publisher.settings.producer == {}


def test_describe_names_the_brokers_and_the_guarantees_not_the_secrets() -> None:
    publisher = KafkaPublisher(bootstrap_servers=["k1:9092", "k2:9092"], topic="orders",
                               producer={"sasl.password": "s3cret"}, delivery_timeout=10)
    assert publisher.describe() == ("KafkaPublisher k1:9092,k2:9092 topic 'orders' "
                                    "(idempotent, acks=all, delivery timeout 10s)")
    config = publisher.settings.config()
    assert (config["enable.idempotence"], config["acks"], config["message.timeout.ms"]) == (
        True, "all", 10_000)
    assert config["partitioner"] == "murmur2_random"


# -- the record's headers, without a broker -----------------------------------------


def record_headers(mode: str, sent: OutboundMessage) -> dict[str, bytes | None]:
    envelope = MessageFormat(mode, SOURCE, KAFKA_BINDING).envelope(sent)
    return dict(kafka_headers(sent.message_id, envelope))


def test_the_record_carries_the_id_and_content_type_as_headers_in_every_format() -> None:
    sent = message(1, created_at=CREATED, headers={
        "tenant": "acme", "ce_id": "spoofed", "message_id": "spoofed", "n": 7, "none": None})
    plain = record_headers("plain", sent)
    assert (plain["message_id"], plain["content-type"]) == (
        sent.message_id.encode(), b"application/json")
    assert (plain["aggregate_id"], plain["attempt"], plain["n"], plain["none"]) == (
        b"A-1", b"1", b"7", None)  # strings as UTF-8, other values as JSON

    assert record_headers("cloudevents-binary", sent) == {
        "tenant": b"acme", "n": b"7", "none": None, "ce_specversion": b"1.0",
        "ce_id": sent.message_id.encode(), "ce_source": SOURCE.encode(),
        "ce_type": b"order.created", "ce_subject": b"A-1", "ce_partitionkey": b"A-1",
        "ce_aggregatetype": b"order", "ce_time": b"2026-11-25T09:30:15.123Z",
        "content-type": b"application/json", "message_id": sent.message_id.encode(),
    }
    assert record_headers("cloudevents-structured", sent) == {
        "tenant": b"acme", "n": b"7", "none": None,
        "content-type": CLOUDEVENTS_JSON.encode(), "message_id": sent.message_id.encode(),
    }


# -- against the broker --------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    yield from running_broker(tmp_path_factory.mktemp("tansu"))


@pytest.fixture
def publishers() -> Iterator[Callable[..., KafkaPublisher]]:
    made: list[KafkaPublisher] = []

    def make(**options: Any) -> KafkaPublisher:
        made.append(KafkaPublisher(**options))
        return made[-1]

    yield make
    for publisher in made:
        publisher.close()


def test_a_batch_arrives_keyed_in_order_with_its_headers(
    broker: TansuBroker, publishers: Callable[..., KafkaPublisher],
) -> None:
    topic = broker.create_topic(unique_topic(), partitions=3)
    publisher = publishers(bootstrap_servers=broker.bootstrap, topic=topic)
    batch = [message(n, aggregate_id=f"A-{n % 4}", headers={"tenant": "acme", "n": n},
                     partition_key="P-7" if n == 9 else None) for n in range(12)]
    started = time.perf_counter()
    results = publisher.publish(batch)
    assert [r.outcome for r in results] == [Outcome.OK] * 12
    print(f"\n12 messages, one delivery wait: {time.perf_counter() - started:.3f}s")

    records = broker.read(topic, 12)
    by_id = {r.header_text["message_id"]: r for r in records}
    for sent in batch:
        record = by_id[sent.message_id]
        assert record.key == sent.effective_partition_key
        assert record.value == sent.payload.encode("utf-8")  # unchanged, byte for byte
        headers = record.header_text
        assert (headers["tenant"], headers["n"], headers["aggregate_id"]) == (
            "acme", str(sent.id), sent.aggregate_id)
        assert (headers["attempt"], headers["content-type"]) == ("1", "application/json")
    assert_one_partition_per_key_in_order(records, lambda r: json.loads(r.value)["n"])


def assert_one_partition_per_key_in_order(records: list[Record],
                                          sequence: Callable[[Record], int]) -> None:
    """Every key's records are on one partition, in increasing ``sequence`` (first
    copies: a resent record may follow the originals)."""
    partitions: dict[str | None, set[int]] = defaultdict(set)
    sequences: dict[str | None, list[int]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        partitions[record.key].add(record.partition)
        if sequence(record) not in sequences[record.key]:
            sequences[record.key].append(sequence(record))
    assert all(len(found) == 1 for found in partitions.values()), partitions
    for key, found in sequences.items():
        assert found == sorted(found), f"key {key} arrived as {found[:20]}..."


def test_a_message_kafka_can_never_take_is_dead_and_the_others_go_through(
    broker: TansuBroker, publishers: Callable[..., KafkaPublisher],
) -> None:
    topic = broker.create_topic(unique_topic())
    publisher = publishers(bootstrap_servers=broker.bootstrap, topic="{topic}",
                           producer={"message.max.bytes": 10_000})
    batch = [message(1, topic=topic),
             message(2, topic=topic, payload=json.dumps({"blob": "x" * 20_000})),
             message(3, topic="orders/eu"),  # not a topic name Kafka allows
             message(4, topic=topic)]
    results = publisher.publish(batch)
    assert [r.outcome for r in results] == [Outcome.OK, Outcome.GIVE_UP, Outcome.GIVE_UP,
                                            Outcome.OK]
    assert results[1].error is not None and results[1].error.startswith("MSG_SIZE_TOO_LARGE")
    assert results[2].error == ("topic 'orders/eu' is not a valid Kafka topic name (1 to 249 "
                                "letters, digits, '.', '_' or '-', and not '.' or '..')")
    assert [r.header_text["message_id"] for r in broker.read(topic, 2)] == [
        batch[0].message_id, batch[3].message_id]


def test_an_unknown_topic_is_dead_where_topics_are_not_created_on_demand(
    broker: TansuBroker, publishers: Callable[..., KafkaPublisher],
) -> None:
    """Tansu creates topics on demand unless the client asks it not to; librdkafka gives
    up on a topic that did not appear after half the delivery timeout."""
    publisher = publishers(bootstrap_servers=broker.bootstrap, topic=unique_topic(),
                           producer={"allow.auto.create.topics": False}, delivery_timeout=4)
    started = time.monotonic()
    [result] = publisher.publish([message(1)])
    assert (result.outcome, result.error) == (
        Outcome.GIVE_UP, "UNKNOWN_TOPIC_OR_PART: Broker: Unknown topic or partition")
    assert time.monotonic() - started < 4


def test_a_full_local_queue_is_drained_and_the_produce_tried_again(
    broker: TansuBroker, publishers: Callable[..., KafkaPublisher],
) -> None:
    topic = broker.create_topic(unique_topic())
    publisher = publishers(bootstrap_servers=broker.bootstrap, topic=topic,
                           producer={"queue.buffering.max.messages": 5})
    batch = [message(n, aggregate_id="A") for n in range(50)]
    assert [r.outcome for r in publisher.publish(batch)] == [Outcome.OK] * 50
    assert [r.header_text["message_id"] for r in broker.read(topic, 50)] == [
        sent.message_id for sent in batch]


def test_no_broker_is_an_outage_found_before_the_delivery_timeout(
    publishers: Callable[..., KafkaPublisher],
) -> None:
    publisher = publishers(bootstrap_servers=f"127.0.0.1:{free_port()}", delivery_timeout=60)
    for _ in range(2):  # and again, on the fresh producer the outage left
        started = time.monotonic()
        with pytest.raises(BrokerUnavailable, match="_ALL_BROKERS_DOWN"):
            publisher.publish([message(1), message(2)])
        assert time.monotonic() - started < 10


def test_the_producer_is_kept_across_batches_and_a_lost_broker_is_found_again(
    tmp_path: Path, publishers: Callable[..., KafkaPublisher],
) -> None:
    with TansuBroker(tmp_path / "tansu.log") as own:
        topic = own.create_topic(unique_topic())
        publisher = publishers(bootstrap_servers=own.bootstrap, topic=topic,
                               delivery_timeout=20)
        assert publisher.publish([message(1)])[0].outcome is Outcome.OK
        producer = publisher._producer
        assert publisher.publish([message(2)])[0].outcome is Outcome.OK
        assert publisher._producer is producer

        own.stop(crash=True)
        started = time.monotonic()
        with pytest.raises(BrokerUnavailable):
            publisher.publish([message(3)])
        assert time.monotonic() - started < 20 + 5
        own.start()
        own.create_topic(topic)
        wait_until(lambda: publish_or_none(publisher, message(4)), timeout=60,
                   what="a publish once the broker is back")


def publish_or_none(publisher: KafkaPublisher, sent: OutboundMessage) -> bool:
    try:
        return publisher.publish([sent])[0].outcome is Outcome.OK
    except BrokerUnavailable:
        return False


# -- CloudEvents, read back with the SDK's Kafka binding ------------------------------


@pytest.mark.parametrize("mode", ["cloudevents-binary", "cloudevents-structured"])
def test_a_consumer_using_the_sdk_reads_every_attribute(
    mode: str, broker: TansuBroker, publishers: Callable[..., KafkaPublisher],
) -> None:
    topic = broker.create_topic(unique_topic())
    with override_settings(EVENTFERRY={"MESSAGE_FORMAT": mode, "CLOUDEVENTS_SOURCE": SOURCE}):
        publisher = publishers(bootstrap_servers=broker.bootstrap, topic=topic)
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    sent = message(1, created_at=CREATED, schema_version="2", trace_id=traceparent,
                   partition_key="P-7", headers={"tenant": "acme"})
    assert publisher.publish([sent])[0].outcome is Outcome.OK

    [record] = broker.read(topic, 1)
    received = KafkaMessage(headers=record.headers, key=record.key, value=record.value)
    read = from_binary if mode == "cloudevents-binary" else from_structured
    event = read(received, JSONFormat())
    assert event.get_attributes() | {"time": None} == {
        "specversion": "1.0", "id": sent.message_id, "source": SOURCE,
        "type": "order.created", "subject": "A-1", "datacontenttype": "application/json",
        "time": None, "partitionkey": "P-7", "aggregatetype": "order",
        "traceparent": traceparent, "schemaversion": "2",
    }
    assert event.get_time() == CREATED
    assert event.get_data() == json.loads(sent.payload)
    assert record.key == "P-7"
    assert record.header_text["tenant"] == "acme"
    if mode == "cloudevents-binary":
        assert record.value == sent.payload.encode("utf-8")
    else:
        assert record.header_text["content-type"] == CLOUDEVENTS_JSON


# -- through a relay process ---------------------------------------------------------

N_AGGREGATES = 20
PER_AGGREGATE = 100


def relay_settings(bootstrap: str, topic: str, *, batch_size: int = 100,
                   **options: Any) -> dict[str, Any]:
    return {
        "CLAIM_TIMEOUT": 60, "BATCH_SIZE": batch_size, "MAX_ATTEMPTS": 5,
        "PUBLISHER": {"BACKEND": KAFKA_PUBLISHER,
                      "OPTIONS": {"bootstrap_servers": bootstrap, "topic": topic, **options}},
    }


def sequenced(prefix: str) -> list[NewEvent]:
    """``PER_AGGREGATE`` events of each of ``N_AGGREGATES`` aggregates, sequence-major."""
    return [NewEvent("order.changed", {"aggregate": f"{prefix}-{a:02d}", "seq": seq},
                     "order", f"{prefix}-{a:02d}")
            for seq in range(PER_AGGREGATE) for a in range(N_AGGREGATES)]


def seq(record: Record) -> int:
    return int(json.loads(record.value)["seq"])


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_relay_delivers_2000_events_keyed_by_aggregate_in_order_each_once(
    broker: TansuBroker, relays: Relays,
) -> None:
    topic = broker.create_topic(unique_topic(), partitions=4)
    ids = publish(sequenced("agg"))
    started = time.monotonic()
    relays.start(relay_settings(broker.bootstrap, topic), "relay", "--poll-interval", "0.2")
    wait_until(all_settled, timeout=120, what="the outbox to drain", relays=relays,
               interval=0.1)
    drained_in = time.monotonic() - started
    summary = relays.stop()["relay"]
    records = broker.read(topic, len(ids))

    assert statuses() == {(Status.DONE, 0): len(ids)}
    assert summary["published"] == len(ids) and summary["retried"] == summary["dead"] == 0
    assert sorted(r.header_text["message_id"] for r in records) == sorted(ids)  # each once
    assert all(r.key == json.loads(r.value)["aggregate"] for r in records)  # keyed
    assert_one_partition_per_key_in_order(records, seq)
    assert len({r.partition for r in records}) > 1
    print(f"\n{len(ids)} events through a relay to Kafka in {drained_in:.1f}s (with the "
          "relay's start-up)")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_broker_stopped_mid_drain_costs_no_attempt_and_loses_nothing(
    tmp_path: Path, relays: Relays,
) -> None:
    """Tansu keeps nothing across a restart (memory storage), so what is checked in Kafka
    is what was acknowledged after it: every event not yet done when the relay found the
    broker gone arrives after the restart, in order per key. That the others were
    published before is the outbox's word: done, with no attempt spent."""
    with TansuBroker(tmp_path / "tansu.log") as own:
        topic = own.create_topic(unique_topic(), partitions=2)
        ids = publish(sequenced("agg"))
        # Small batches, so the drain takes a while.
        relays.start(relay_settings(own.bootstrap, topic, batch_size=10, delivery_timeout=10),
                     "relay", "--poll-interval", "0.2")
        done_at_stop = cut_mid_drain(relays, lambda: own.stop(crash=True))
        done_before = set(OutboxEvent.objects.done().values_list("message_id", flat=True))
        own.start()
        own.create_topic(topic, partitions=2)
        wait_until(all_settled, timeout=120, what="the rest after the broker came back",
                   relays=relays, interval=0.1)
        summary = relays.stop()["relay"]
        after = own.read_all(topic)

    assert done_at_stop < len(ids), "the relay finished before the stop: nothing tested"
    assert statuses() == {(Status.DONE, 0): len(ids)}
    assert summary["retried"] == summary["dead"] == 0
    arrived = Counter(r.header_text["message_id"] for r in after)
    assert set(ids) - done_before <= set(arrived)
    assert set(arrived) <= set(ids)
    assert_one_partition_per_key_in_order(after, seq)
    print(f"\nbroker stopped after {done_at_stop} of {len(ids)}; "
          f"{len(done_before)} done when the relay found it gone, "
          f"{len(arrived)} acknowledged after the restart, "
          f"{sum(n > 1 for n in arrived.values())} of them twice; {summary}")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_oversized_event_goes_dead_with_the_reason(
    broker: TansuBroker, relays: Relays,
) -> None:
    topic = broker.create_topic(unique_topic())
    small, big, after = publish([
        NewEvent("order.created", {"n": 1}, "order", "A"),
        # Within the outbox's MAX_PAYLOAD_BYTES (1 MiB), over librdkafka's
        # message.max.bytes (1,000,000).
        NewEvent("order.created", {"blob": "x" * 1_020_000}, "order", "B"),
        NewEvent("order.created", {"n": 3}, "order", "B"),
    ])
    relays.start(relay_settings(broker.bootstrap, topic), "relay", "--poll-interval", "0.1")
    wait_until(all_settled, timeout=60, what="the outbox to settle", relays=relays)
    summary = relays.stop()["relay"]

    dead = OutboxEvent.objects.get(message_id=big)
    assert dead.status == Status.DEAD
    assert (dead.last_error or "").startswith("MSG_SIZE_TOO_LARGE: "), dead.last_error
    assert OutboxEvent.objects.filter(status=Status.DONE).count() == 2
    assert sorted(r.header_text["message_id"] for r in broker.read(topic, 2)) == sorted(
        [small, after])
    assert (summary["published"], summary["dead"]) == (2, 1)
