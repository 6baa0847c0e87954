"""A publisher for Kafka, on confluent-kafka (librdkafka's idempotent producer).

Configure it with::

    EVENTFERRY = {"PUBLISHER": {
        "BACKEND": "eventferry_django.publishers.kafka.KafkaPublisher",
        "OPTIONS": {"bootstrap_servers": "kafka-1:9092,kafka-2:9092"},
    }}

Each batch is produced whole, then the publisher waits once for every delivery report:
one round of broker requests per batch (librdkafka groups the records per partition),
not one per message. What the options accept, and the librdkafka configuration they
become, is in :mod:`~eventferry_django.publishers.kafka_settings`.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.checks import CheckMessage

from .base import (
    BrokerUnavailable,
    OutboundMessage,
    Outcome,
    Publisher,
    PublishResult,
    json_text,
)
from .kafka_settings import (
    KafkaSettings,
    confluent_kafka,
    is_installed,
    mask_secrets,
    producer_problem,
    servers_problem,
    servers_text,
    topic_function,
    topic_name_problem,
    topic_problem,
)
from .message_format import KAFKA_BINDING, Envelope, MessageFormat
from .options import Option, OptionTable, positive_seconds, raise_if_serious

logger = logging.getLogger(__name__)

#: librdkafka's own log lines (confluent-kafka maps their syslog levels onto Python's).
librdkafka_logger = logging.getLogger("eventferry_django.publishers.kafka.librdkafka")

SERVERS_REQUIRED = "the Kafka brokers are required, e.g. 'localhost:9092'"

#: KafkaPublisher's OPTIONS, declared once: ``check()`` and the constructor's defaults.
OPTIONS = OptionTable((
    Option("bootstrap_servers", "eventferry.E072", servers_problem, required=SERVERS_REQUIRED,
           required_id="eventferry.E070"),
    Option("topic", "eventferry.E072", topic_problem),
    Option("producer", "eventferry.E074", producer_problem, mask=mask_secrets),
    Option("delivery_timeout", "eventferry.E072", positive_seconds, default=30),
), unknown_id="eventferry.E071")

#: Delivery errors that say the brokers could not be reached, or did not answer within
#: the delivery timeout: nothing in the batch is to blame, so it goes back unspent.
UNREACHABLE = frozenset({
    "_MSG_TIMED_OUT", "_TIMED_OUT", "_TIMED_OUT_QUEUE", "_TRANSPORT", "_ALL_BROKERS_DOWN",
    "_RESOLVE", "_PURGE_QUEUE", "_PURGE_INFLIGHT", "_DESTROY", "_FATAL",
})
#: Errors no retry can cure: the message is dead at once, with the broker's reason.
REFUSED = frozenset({
    "MSG_SIZE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD", "INVALID_TIMESTAMP",
    "UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION", "INVALID_TOPIC_EXCEPTION",
    "_INVALID_ARG", "_MSG_SIZE_TOO_LARGE",
})
#: Beyond the delivery timeout, how long a batch waits for the reports librdkafka owes
#: it: its timeout scan runs about once a second, and a report must not be waited for
#: forever if it never comes.
REPORT_GRACE = 5.0


def _reason(error: Any) -> str:
    """A KafkaError as ``last_error`` and the logs show it: its name and librdkafka's text."""
    return f"{error.name()}: {error.str()}"


class _Deliveries:
    """The delivery reports of one batch, one slot per message, filled by librdkafka's
    callbacks while the publisher polls."""

    def __init__(self, size: int) -> None:
        self.results: list[PublishResult | None] = [None] * size
        self.unreachable: list[str] = []
        self.pending = size

    def report(self, index: int, error: Any, record: Any = None) -> None:
        """librdkafka's ``on_delivery(err, msg)`` for message ``index``; also called for
        a message refused before it was queued."""
        if self.results[index] is not None:
            return
        self.pending -= 1
        if error is None:
            self.results[index] = PublishResult.ok()
            return
        name = error.name()
        if name in UNREACHABLE or error.fatal():
            self.unreachable.append(_reason(error))
            self.results[index] = PublishResult(Outcome.RETRY, _reason(error))
        elif name in REFUSED:
            self.results[index] = PublishResult(Outcome.GIVE_UP, _reason(error))
        else:  # retriable, or a refusal that may be cured (an ACL, a policy): an attempt
            self.results[index] = PublishResult(Outcome.RETRY, _reason(error))

    def refuse(self, index: int, reason: str) -> None:
        """A message that cannot be produced at all: dead, with ``reason``."""
        self.pending -= 1
        self.results[index] = PublishResult(Outcome.GIVE_UP, reason)


class KafkaPublisher(Publisher):
    """Publishes each message as a Kafka record, through librdkafka's idempotent producer.

    OPTIONS:

    ``bootstrap_servers`` (required)
        ``"host:port,host:port"`` or a list of ``"host:port"``.
    ``topic`` (``"{topic}"``)
        The record's topic: a format string using ``{topic}``, ``{aggregate_type}``,
        ``{aggregate_id}`` and ``{partition_key}``, or one topic name for every event. A
        rendered name that is not a valid Kafka topic name makes the message dead.
    ``producer`` (``{}``)
        More librdkafka producer settings (``compression.type``, ``linger.ms``,
        ``security.protocol``, ``sasl.*``, ``partitioner``...). ``manage.py check`` refuses
        those that would break the guarantees below (``acks`` other than ``all``,
        ``enable.idempotence`` off, ``max.in.flight...`` above 5, ``transactional.id``),
        callbacks, and what other OPTIONS give (the brokers, the timeout); it also asks
        librdkafka, without connecting, whether it takes the rest.
    ``delivery_timeout`` (30)
        Seconds a message may take to be acknowledged, librdkafka's retries included
        (its ``message.timeout.ms``); a batch waits for its reports that long, plus
        :data:`REPORT_GRACE`. Keep it well below ``CLAIM_TIMEOUT`` and the time a
        stopping relay is given.

    The record: key the event's partition key (the aggregate id unless the event gave
    one), so an aggregate's events share a partition; value the payload, unchanged, as
    UTF-8 (in structured CloudEvents mode, the CloudEvent); headers the event's own plus
    the reserved ones (``EVENTFERRY["MESSAGE_FORMAT"]`` decides, with the CloudEvents
    Kafka binding's ``ce_`` headers in binary mode), ``message_id`` and
    ``content-type``. String header values are sent as UTF-8, others as JSON.

    Outcomes: acknowledged by every in-sync replica (``acks=all``) -> ``OK``; refused
    for good (larger than ``message.max.bytes``, an unknown topic where topics are not
    created on demand, an invalid record or topic name) -> ``GIVE_UP`` with the
    broker's reason; any other refusal -> ``RETRY`` with it (an attempt spent). When
    the brokers cannot be reached, or a message is not acknowledged within
    ``delivery_timeout``, the whole batch raises :class:`BrokerUnavailable` (no attempt
    spent): records of it that reached Kafka will be sent again, so delivery is at
    least once. librdkafka reporting every broker down ends the wait at once.

    Order: librdkafka's idempotent producer (forced on, with ``acks=all`` and at most 5
    requests in flight) keeps records in produce order per partition through its own
    retries, without duplicates; the relay hands it an aggregate's chain in id order in
    one call. So an aggregate's events are in order on its partition, and after an
    outage the first copy of each is still in order. A consumer keeps that order by
    handling a partition's records one after another.

    One producer serves every batch until :meth:`close`, or until an outage or a fatal
    producer error: then it is dropped (its queue purged) and the next :meth:`publish`
    starts a new one. Calls are serialised by a lock.
    """

    def __init__(self, **options: Any) -> None:
        given = {**OPTIONS.defaults(), **options}
        super().__init__(**given)
        raise_if_serious(self.check(given))
        self.settings = KafkaSettings(  # check() reported E070 if bootstrap_servers is missing
            bootstrap_servers=servers_text(given["bootstrap_servers"]), topic=given["topic"],
            producer=dict(given["producer"] or {}),
            delivery_timeout=float(given["delivery_timeout"]),
        )
        self.topic_for = topic_function(given["topic"])
        self.message_format = MessageFormat.from_settings(KAFKA_BINDING)
        self._lock = threading.Lock()
        self._producer: Any = None  # confluent_kafka.Producer
        #: confluent_kafka.KafkaException, once the library is imported.
        self._refusal: type[Exception] = Exception
        #: Why the brokers are out of reach, as librdkafka's error callback last said.
        self._outage: str | None = None

    @classmethod
    def check(cls, options: Mapping[str, Any]) -> list[CheckMessage]:
        """The OPTIONS table's checks, then librdkafka's own verdict on the producer
        settings (without connecting)."""
        installed = is_installed()
        messages = cls.missing_dependency(installed, "confluent-kafka", "kafka",
                                          "eventferry.E073")
        found = OPTIONS.check(cls, options)
        messages += found
        if installed and not any(m.is_serious() for m in found):
            given = {**OPTIONS.defaults(), **options}
            settings = KafkaSettings(
                bootstrap_servers="", topic=None, producer=given["producer"] or {},
                delivery_timeout=float(given["delivery_timeout"]))
            refused = settings.refused_by_librdkafka()
            if refused is not None:
                messages.append(OPTIONS["producer"].error(
                    cls.__name__, settings.producer, f"librdkafka refuses it: {refused}",
                    "eventferry.E072"))
        return messages

    def describe(self) -> str:
        settings = self.settings
        return (f"KafkaPublisher {settings.bootstrap_servers} topic "
                f"{settings.topic or '{topic}'!r} (idempotent, acks=all, delivery timeout "
                f"{settings.delivery_timeout:g}s)")

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        if not messages:
            return []
        with self._lock:
            try:
                return self._publish(messages)
            except BaseException:
                # Records of the batch may still be queued: none must go out behind the
                # relay's back once it has handed the batch back.
                self._drop()
                raise

    def close(self) -> None:
        with self._lock:
            self._drop()

    # -- one batch -------------------------------------------------------------------

    def _publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        producer = self._ready_producer()
        deadline = time.monotonic() + self.settings.delivery_timeout + REPORT_GRACE
        deliveries = _Deliveries(len(messages))
        for index, message in enumerate(messages):
            self._produce(producer, message, index, deliveries, deadline)
        while deliveries.pending and self._outage is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._unavailable(f"{deliveries.pending} of {len(messages)} delivery "
                                        "reports did not come")
            producer.poll(left)
        if deliveries.pending:
            raise self._unavailable(self._outage or "")
        if deliveries.unreachable:
            raise self._unavailable(
                f"{len(deliveries.unreachable)} of {len(messages)} messages not delivered: "
                f"{deliveries.unreachable[0]}")
        return [result for result in deliveries.results if result is not None]

    def _produce(self, producer: Any, message: OutboundMessage, index: int,
                 deliveries: _Deliveries, deadline: float) -> None:
        """Queue one record; a record librdkafka refuses outright is reported at once,
        and a full local queue is drained before trying again."""
        try:
            topic = self.topic_for(message)
            problem = topic_name_problem(topic)
            if problem is not None:
                deliveries.refuse(index, f"topic {topic!r} {problem}")
                return
            envelope = self.message_format.envelope(message)
            value = envelope.body.encode("utf-8")
        except (UnicodeEncodeError, ValueError, KeyError) as exc:
            deliveries.refuse(index, f"cannot be made a Kafka record: {exc!r}")
            return
        while True:
            try:
                producer.produce(
                    topic, value=value, key=message.effective_partition_key.encode("utf-8"),
                    headers=kafka_headers(message.message_id, envelope),
                    on_delivery=functools.partial(deliveries.report, index),
                )
                return
            except BufferError:  # librdkafka's queue is full: serve reports, try again
                if time.monotonic() >= deadline or self._outage is not None:
                    raise self._unavailable(
                        self._outage or "librdkafka's queue stayed full") from None
                producer.poll(0.1)
            except self._refusal as exc:  # KafkaException: this record is refused
                deliveries.report(index, exc.args[0])
                return

    # -- the producer ------------------------------------------------------------------

    def _ready_producer(self) -> Any:
        """The producer, new if there is none. Reports and errors left over since the
        last batch are served first; if they said every broker was down, the producer is
        replaced (a fresh one reports anew whether the brokers are there, where the old
        one would stay silent about an outage it already reported)."""
        if self._producer is not None:
            self._producer.poll(0)
        if self._producer is not None and self._outage is not None:
            logger.info("KafkaPublisher: starting a new producer after: %s", self._outage)
            self._drop()
        self._outage = None
        if self._producer is None:
            kafka = confluent_kafka()
            self._refusal = kafka.KafkaException
            self._producer = kafka.Producer(self.settings.config(
                error_cb=self._on_error, logger=librdkafka_logger))
        return self._producer

    def _on_error(self, error: Any) -> None:
        """librdkafka's error callback: every broker down, or a fatal producer error,
        ends the batch's wait; other errors (one connection lost) librdkafka rides out."""
        if error.fatal() or error.name() == "_ALL_BROKERS_DOWN":
            self._outage = _reason(error)
        else:
            logger.debug("KafkaPublisher: %s", _reason(error))

    def _unavailable(self, why: str) -> BrokerUnavailable:
        return BrokerUnavailable(f"Kafka at {self.settings.bootstrap_servers}: {why}")

    def _drop(self) -> None:
        """Forget the producer after purging what it still holds: the batch that was
        waiting goes back to the outbox and will be produced again."""
        producer, self._producer = self._producer, None
        if producer is None:
            return
        try:
            producer.purge(in_queue=True, in_flight=True, blocking=False)
            producer.poll(0)
        except Exception:  # a broken producer cannot spoil dropping it
            logger.debug("KafkaPublisher: purging the dropped producer failed", exc_info=True)


def kafka_headers(message_id: str, envelope: Envelope) -> list[tuple[str, bytes | None]]:
    """The record's headers: the envelope's, then ``content-type`` (the Kafka binding's
    ``datacontenttype``, for every format) and ``message_id``, which an event's own
    headers of those names cannot replace."""
    headers = {**envelope.headers, "content-type": envelope.content_type,
               "message_id": message_id}
    return [(name, _header_value(value)) for name, value in headers.items()]


def _header_value(value: Any) -> bytes | None:
    """A header's value as a Kafka header holds it: strings as UTF-8, None as a null
    header, anything else as its JSON text."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json_text(value).encode("utf-8")
