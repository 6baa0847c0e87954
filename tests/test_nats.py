"""NatsPublisher on a real NATS JetStream: its OPTIONS checks, a relay process draining
2,000 events into a stream in order per aggregate, each once; a republished batch
dropped by the stream's deduplication; a private server stopped mid-drain; messages no
stream takes or too large for the server or the stream, dead with the reason.

Each test makes a stream of its own (``tests/nats_broker.py``) and deletes it; without
nats-py, or without a server answering, the broker tests skip and say why.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.test import override_settings

from eventferry_django import NewEvent, publish_events
from eventferry_django.exceptions import ConfigurationError
from eventferry_django.inbox.nats import message_id_of
from eventferry_django.models import OutboxEvent, Status
from eventferry_django.publishers import nats as nats_publisher
from eventferry_django.publishers.base import BrokerUnavailable, Outcome
from eventferry_django.publishers.message_format import percent_decode
from eventferry_django.publishers.nats import NatsPublisher, covers, subject_problem

from . import test_relay_rabbitmq as rabbit
from .nats_broker import (
    NATS_URL,
    PrivateServer,
    Stream,
    nats,
    on_server,
    require_nats,
)
from .test_publishers import ids_and_messages, message, outcomes
from .test_relay_rabbitmq import (
    Relays,
    all_settled,
    cut_mid_drain,
    publish,
    statuses,
    wait_until,
)

# The relay tests' fixture: relay processes, each with its own log, killed at teardown.
relays = rabbit.relays

NATS_PUBLISHER = "eventferry_django.publishers.nats.NatsPublisher"


# -- OPTIONS, without a server ---------------------------------------------------------

def test_valid_options_pass() -> None:
    pytest.importorskip("nats", reason="nats-py is not installed (the [nats] extra)")
    assert NatsPublisher.check({"servers": NATS_URL}) == []
    assert NatsPublisher.check({
        "servers": ["nats://a:4222", "tls://b:4222", "127.0.0.1:4223"],
        "subject": "orders.{aggregate_type}.{partition_key}", "stream": "ORDERS",
        "connect_timeout": 1, "publish_timeout": 2.5,
        "connect_options": {"user_credentials": "/etc/nats/relay.creds"},
    }) == []


@pytest.mark.parametrize(("options", "check_id", "named"), [
    ({}, "eventferry.E080", "OPTIONS['servers'] is None"),
    ({"servers": " "}, "eventferry.E080", "a NATS server URL"),
    ({"servers": NATS_URL, "stream_name": "X"}, "eventferry.E081", "'stream_name'"),
    ({"servers": []}, "eventferry.E082", "a NATS server URL, or a list of them"),
    ({"servers": [NATS_URL, ""]}, "eventferry.E082", "a NATS server URL"),
    ({"servers": "http://u:s3cret@host:4222"}, "eventferry.E082",
     "http://u:****@host:4222 is not a NATS URL"),
    ({"servers": NATS_URL, "subject": "{topic}.{tenant}"}, "eventferry.E082", "'tenant'"),
    ({"servers": NATS_URL, "subject": "orders {topic}"}, "eventferry.E082",
     "renders subjects like 'orders x', which NATS refuses"),
    ({"servers": NATS_URL, "subject": "orders.>.{topic}"}, "eventferry.E082", "wildcards"),
    ({"servers": NATS_URL, "subject": "orders.subject.nope"}, "eventferry.E082",
     "cannot be imported"),
    ({"servers": NATS_URL, "subject": 5}, "eventferry.E082", "OPTIONS['subject'] is 5"),
    ({"servers": NATS_URL, "stream": "orders.v2"}, "eventferry.E082", "stream name"),
    ({"servers": NATS_URL, "stream": ""}, "eventferry.E082", "OPTIONS['stream'] is ''"),
    ({"servers": NATS_URL, "connect_timeout": 0}, "eventferry.E082",
     "OPTIONS['connect_timeout'] is 0"),
    ({"servers": NATS_URL, "publish_timeout": "10"}, "eventferry.E082",
     "OPTIONS['publish_timeout'] is '10'"),
    ({"servers": NATS_URL, "connect_options": {"allow_reconnect": True}}, "eventferry.E082",
     "['allow_reconnect'], which the publisher decides"),
    ({"servers": NATS_URL, "connect_options": "name=relay"}, "eventferry.E082",
     "a dict of nats.connect() keyword arguments"),
])
def test_check_names_the_bad_option(options: dict[str, Any], check_id: str, named: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nats_publisher, "_nats_installed", lambda: True)
    found = ids_and_messages(NatsPublisher.check(options))
    assert len(found) == 1, found
    assert found[0][0] == check_id
    assert named in found[0][1]
    assert "s3cret" not in found[0][1]
    with pytest.raises(ConfigurationError, match="NatsPublisher"):
        NatsPublisher(**options)


def test_check_without_nats_py(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("nats", "nats.js"):
        monkeypatch.setitem(sys.modules, module, None)  # importing it now raises ImportError
    found = NatsPublisher.check({"servers": NATS_URL})
    assert [m.id for m in found] == ["eventferry.E083"]
    assert found[0].hint == 'pip install "eventferry-django[nats]"'


def test_describe_masks_passwords_and_tokens() -> None:
    publisher = NatsPublisher(
        servers=["nats://relay:s3cret@127.0.0.1:4222", "nats://t0ken@127.0.0.1:4223"],
        subject="orders.{aggregate_type}", stream="ORDERS")
    assert publisher.describe() == (
        "NatsPublisher nats://relay:****@127.0.0.1:4222, nats://****@127.0.0.1:4223 subject "
        "'orders.{aggregate_type}' stream 'ORDERS'")


def test_subjects_and_stream_patterns() -> None:
    assert subject_problem("orders.created") is None
    for refused in ("", "orders..created", "orders.", "order created", "orders.*", ">",
                    "tab\there"):
        assert subject_problem(refused) is not None, refused
    assert covers("orders.>", "orders.created.v1")
    assert covers("orders.*", "orders.created") and not covers("orders.*", "orders.a.b")
    assert not covers("orders.>", "orders") and covers("orders", "orders")


def test_defaults_come_from_the_option_table() -> None:
    table = nats_publisher.OPTIONS
    publisher = NatsPublisher(servers="nats://127.0.0.1:4222")
    assert publisher.options == {**table.defaults(), "servers": "nats://127.0.0.1:4222"}
    settings = publisher.settings
    assert (settings.connect_timeout, settings.publish_timeout, settings.stream) == (
        table["connect_timeout"].default, table["publish_timeout"].default, None)


# -- one publisher, the shared server ---------------------------------------------------

@pytest.fixture(scope="module")
def nats_url() -> str:
    return require_nats()


@pytest.fixture
def stream(nats_url: str) -> Iterator[Stream]:
    made = Stream(nats_url)
    yield made
    made.delete()


@pytest.fixture
def publisher(nats_url: str, stream: Stream) -> Iterator[NatsPublisher]:
    made = NatsPublisher(servers=nats_url, subject=stream.prefix + ".{topic}",
                         stream=stream.name, connect_timeout=1, publish_timeout=3)
    yield made
    made.close()


def test_a_republished_batch_is_dropped_by_the_stream(
    publisher: NatsPublisher, stream: Stream,
) -> None:
    batch = [message(n, aggregate_id=f"A-{n % 5}", headers={"x-tenant": "acme", "n": n})
             for n in range(200)]
    assert outcomes(publisher.publish(batch)) == [Outcome.OK] * 200
    assert (stream.count(), publisher.duplicates) == (200, 0)

    # The relay crashed before its ack: another relay publishes the same rows again.
    again = [message(m.id, **{**vars(m), "attempts": 1}) for m in batch]
    assert outcomes(publisher.publish(again)) == [Outcome.OK] * 200
    assert (stream.count(), publisher.duplicates) == (200, 200)

    stored = stream.messages()
    assert [m.headers["Nats-Msg-Id"] for m in stored] == [m.message_id for m in batch]
    first = stored[7]
    assert first.subject == f"{stream.prefix}.order.created"
    assert first.data.decode() == batch[7].payload  # the row's JSON text, unchanged
    assert first.headers["Content-Type"] == "application/json"
    assert first.headers["Nats-Expected-Stream"] == stream.name
    assert (first.headers["x-tenant"], first.headers["n"]) == ("acme", "7")
    assert (first.headers["aggregate_id"], first.headers["attempt"]) == ("A-2", "1")


def test_messages_the_stream_or_the_server_refuse_are_given_up_alone(
    nats_url: str, stream: Stream, publisher: NatsPublisher,
) -> None:
    max_payload = on_server(nats_url, lambda client: _max_payload(client))
    big = "x" * (max_payload - 100)  # the body fits; with its headers it does not
    batch = [
        message(1),
        message(2, payload=json.dumps(big)),
        message(3, topic="order created"),  # no subject: a space
        message(4, headers={"x-note": "two\nlines"}),
        message(5, headers={"Nats-Rollup": "all", "content-type": "text/plain"}),
    ]
    results = publisher.publish(batch)
    assert outcomes(results) == [Outcome.OK, Outcome.GIVE_UP, Outcome.GIVE_UP,
                                 Outcome.GIVE_UP, Outcome.OK]
    assert f"more than the server's max_payload ({max_payload})" in str(results[1].error)
    assert "order created' is not a subject" in str(results[2].error)
    assert "header 'x-note' holds a line break" in str(results[3].error)
    stored = stream.messages()
    assert [m.headers["Nats-Msg-Id"] for m in stored] == [batch[0].message_id,
                                                          batch[4].message_id]
    assert "Nats-Rollup" not in stored[1].headers  # an event cannot steer JetStream
    assert stored[1].headers["Content-Type"] == "application/json"


async def _max_payload(client: Any) -> int:
    return int(client.max_payload)


def test_a_subject_outside_the_configured_stream_is_refused_unsent(
    nats_url: str, stream: Stream,
) -> None:
    publisher = NatsPublisher(servers=nats_url, subject="elsewhere.{topic}",
                              stream=stream.name)
    try:
        [result] = publisher.publish([message(1)])
    finally:
        publisher.close()
    assert result.outcome is Outcome.GIVE_UP
    assert f"subject 'elsewhere.order.created' is not among stream '{stream.name}'" in str(
        result.error)
    assert stream.count() == 0


def test_a_missing_stream_or_server_is_an_outage(nats_url: str) -> None:
    missing = NatsPublisher(servers=nats_url, stream="EVENTFERRY_NO_SUCH_STREAM")
    nobody = NatsPublisher(servers="nats://127.0.0.1:9", connect_timeout=0.5)
    try:
        with pytest.raises(BrokerUnavailable, match="stream 'EVENTFERRY_NO_SUCH_STREAM' "
                                                    "does not exist"):
            missing.publish([message(1)])
        with pytest.raises(BrokerUnavailable, match=re.escape(
                "Cannot connect to NATS at nats://127.0.0.1:9")):
            nobody.publish([message(1)])
    finally:
        missing.close()
        nobody.close()


def test_a_stream_deleted_under_the_publisher_is_an_outage(nats_url: str) -> None:
    stream = Stream(nats_url)
    publisher = NatsPublisher(servers=nats_url, subject=stream.prefix + ".{topic}",
                              stream=stream.name, publish_timeout=2)
    try:
        assert outcomes(publisher.publish([message(1)])) == [Outcome.OK]
        stream.delete()
        # It took the subject a moment ago: not the message's fault, so no attempt spent.
        with pytest.raises(BrokerUnavailable, match=re.escape(
                f"stream '{stream.name}' did not answer (no responders)")):
            publisher.publish([message(2)])
        with pytest.raises(BrokerUnavailable, match="does not exist"):  # looked up again
            publisher.publish([message(2)])
    finally:
        publisher.close()
        with contextlib.suppress(Exception):  # deleted already, unless the test failed early
            stream.delete()


@pytest.mark.parametrize("configured", [True, False], ids=["stream", "no-stream"])
def test_jetstream_stopping_under_open_connections_is_an_outage(
    tmp_path: Path, configured: bool,
) -> None:
    """A server shutting down stops JetStream before it closes connections; meanwhile
    a stream's subjects answer "no responders". That is no message's fault: nothing is
    given up or retried (which spends an attempt), the batch is an outage."""
    nats()
    server = PrivateServer(tmp_path)
    server.start()
    stream = Stream(server.url)
    publisher = NatsPublisher(servers=server.url, subject=stream.prefix + ".{topic}",
                              stream=stream.name if configured else None,
                              connect_timeout=0.5, publish_timeout=1)
    try:
        assert outcomes(publisher.publish([message(1)])) == [Outcome.OK]
        server.stop_jetstream()
        subject = f"{stream.prefix}.order.created"
        expected = (f"stream '{stream.name}' did not answer (no responders)" if configured
                    else f"no stream answered for '{subject}', and JetStream did not say "
                    "which takes it (is JetStream on?)")
        with pytest.raises(BrokerUnavailable, match=re.escape(expected)):
            publisher.publish([message(2), message(3)])
    finally:
        publisher.close()
        server.stop()


def test_a_duplicate_window_shorter_than_a_republish_is_warned_about(
    nats_url: str, caplog: pytest.LogCaptureFixture,
) -> None:
    stream = Stream(nats_url, duplicate_window=30)  # CLAIM_TIMEOUT is 60 s
    publisher = NatsPublisher(servers=nats_url, subject=stream.prefix + ".{topic}",
                              stream=stream.name)
    try:
        with caplog.at_level("WARNING", logger="eventferry_django.publishers.nats_link"):
            assert outcomes(publisher.publish([message(1)])) == [Outcome.OK]
    finally:
        publisher.close()
        stream.delete()
    assert f"JetStream stream '{stream.name}' drops duplicates for 30s, less than the 76s" in (
        caplog.text)


def test_cloudevents_binary_follows_the_nats_binding(
    nats_url: str, stream: Stream,
) -> None:
    eventferry = {"MESSAGE_FORMAT": "cloudevents-binary",
                  "CLOUDEVENTS_SOURCE": "/shop/orders"}
    with override_settings(EVENTFERRY=eventferry):
        publisher = NatsPublisher(servers=nats_url, subject=stream.prefix + ".{topic}")
    try:
        sent = message(1, aggregate_id="order 7 ü", message_id="m-1")
        assert outcomes(publisher.publish([sent])) == [Outcome.OK]
    finally:
        publisher.close()
    [stored] = stream.messages()
    headers = stored.headers
    assert headers["ce-id"] == "m-1" == headers["Nats-Msg-Id"]
    assert (headers["ce-specversion"], headers["ce-type"]) == ("1.0", "order.created")
    assert headers["ce-source"] == "/shop/orders"
    assert headers["ce-datacontenttype"] == "application/json"
    assert headers["ce-subject"] == "order%207%20%C3%BC"  # percent-encoded, as specified
    assert percent_decode(headers["ce-subject"]) == "order 7 ü"
    assert "aggregate_id" not in headers  # the attributes carry it
    assert message_id_of(stored) == "m-1"  # as a consumer reads it


# -- relays as real processes ---------------------------------------------------------

def relay_settings(url: str, *, subject: str, stream: str | None = None,
                   batch_size: int = 100, **options: Any) -> dict[str, Any]:
    publisher_options: dict[str, Any] = {"servers": url, "subject": subject, **options}
    if stream is not None:
        publisher_options["stream"] = stream
    return {"CLAIM_TIMEOUT": 60, "BATCH_SIZE": batch_size, "MAX_ATTEMPTS": 3,
            "BACKOFF": {"BASE": 0.05, "MAX": 0.1, "JITTER": 0},
            "PUBLISHER": {"BACKEND": NATS_PUBLISHER, "OPTIONS": publisher_options}}


def events(prefix: str, aggregates: int, per_aggregate: int) -> list[NewEvent]:
    """Sequence-major: event n of every aggregate is written before event n+1 of any."""
    return [NewEvent(f"order.step{seq % 7}", {"aggregate": f"{prefix}-{a:02d}", "seq": seq},
                     "order", f"{prefix}-{a:02d}")
            for seq in range(per_aggregate) for a in range(aggregates)]


def assert_once_each_in_order(stored: list[Any], ids: list[str],
                              per_aggregate: int) -> None:
    """Every id stored exactly once, and each aggregate's ``seq`` 0, 1, 2, ... in stream
    order."""
    counts = Counter(m.headers["Nats-Msg-Id"] for m in stored)
    assert set(counts) == set(ids) and max(counts.values()) == 1, counts.most_common(3)
    sequences: dict[str, list[int]] = defaultdict(list)
    for got in stored:
        payload = json.loads(got.data)
        assert got.headers["aggregate_id"] == payload["aggregate"]
        sequences[payload["aggregate"]].append(payload["seq"])
    for aggregate, sequence in sequences.items():
        assert sequence == list(range(per_aggregate)), f"{aggregate}: {sequence[:20]}..."


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_relay_drains_2000_events_into_jetstream_in_order_each_once(
    nats_url: str, stream: Stream, relays: Relays,
) -> None:
    ids = publish(events("agg", 20, 100))
    settings = relay_settings(nats_url, subject=stream.prefix + ".{aggregate_type}.{topic}",
                              stream=stream.name, batch_size=100)
    relays.start(settings, "relay", "--poll-interval", "0.2")
    wait_until(all_settled, timeout=120, what="the outbox to drain", relays=relays)
    summary = relays.stop()["relay"]

    assert statuses() == {(Status.DONE, 0): 2000}
    assert summary["published"] == 2000 and summary["retried"] == summary["dead"] == 0
    stored = stream.messages()
    assert len(stored) == 2000
    assert_once_each_in_order(stored, ids, 100)
    assert stored[0].subject.startswith(f"{stream.prefix}.order.order.step")
    assert f"NatsPublisher {nats_url} subject" in relays.text("relay")


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_server_stopped_mid_drain_loses_nothing_and_spends_nothing(
    tmp_path: Path, relays: Relays,
) -> None:
    nats()
    server = PrivateServer(tmp_path)
    server.start()
    try:
        stream = Stream(server.url)  # JetStream stores in files unless told otherwise
        ids = publish(events("cut", 20, 100))
        settings = relay_settings(server.url, subject=stream.prefix + ".{topic}",
                                  stream=stream.name, batch_size=50,
                                  connect_timeout=0.5, publish_timeout=2)
        relays.start(settings, "relay", "--batch-size", "50", "--poll-interval", "0.2")
        done_at_stop = cut_mid_drain(relays, server.stop)
        assert not OutboxEvent.objects.filter(status=Status.DEAD).exists()
        server.start()
        wait_until(all_settled, timeout=90, what="the rest after the server came back",
                   relays=relays)
        summary = relays.stop()["relay"]

        assert done_at_stop < len(ids), "the relay finished before the stop: nothing tested"
        assert statuses() == {(Status.DONE, 0): len(ids)}
        assert summary["dead"] == summary["retried"] == 0
        # What reached the stream before the stop and was sent again after it, the
        # stream dropped as a duplicate (its file store kept the ids): once each.
        assert_once_each_in_order(stream.messages(), ids, 100)
    finally:
        server.stop()


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_no_stream_and_too_large_go_dead_with_the_reason(
    nats_url: str, relays: Relays,
) -> None:
    """The subject is ``{aggregate_type}.created``: aggregate type ``nowhere`` has no
    stream; the stream of the others takes messages of at most 2,000 bytes."""
    limited = Stream(nats_url, max_msg_size=2000)
    nowhere_type = "eventferry-nowhere-" + uuid.uuid4().hex[:8]
    max_payload = on_server(nats_url, _max_payload)
    try:
        with transaction.atomic():
            nowhere, oversized, over_stream, fine = publish_events([
                NewEvent("order.created", {"n": 1}, nowhere_type, "A"),
                # The body fits the server's max_payload; with its headers it does not.
                NewEvent("order.created", {"blob": "x" * (max_payload - 60)}, limited.prefix,
                         "B"),
                NewEvent("order.created", {"blob": "y" * 3000}, limited.prefix, "C"),
                NewEvent("order.created", {"n": 4}, limited.prefix, "D"),
            ])
        relays.start(relay_settings(nats_url, subject="{aggregate_type}.created"), "relay",
                     "--poll-interval", "0.1")
        wait_until(all_settled, timeout=60, what="the outbox to settle", relays=relays)
        summary = relays.stop()["relay"]

        rows = {row.message_id: row for row in OutboxEvent.objects.all()}
        for dead in (nowhere, oversized, over_stream):
            assert rows[dead].status == Status.DEAD, rows[dead].last_error
        assert "no JetStream stream takes this subject" in str(rows[nowhere].last_error)
        assert f"max_payload ({max_payload})" in str(rows[oversized].last_error)
        assert "message size exceeds maximum allowed" in str(rows[over_stream].last_error)
        assert rows[fine].status == Status.DONE
        assert [m.headers["Nats-Msg-Id"] for m in limited.messages()] == [fine]
        assert (summary["published"], summary["dead"]) == (1, 3)
    finally:
        limited.delete()
