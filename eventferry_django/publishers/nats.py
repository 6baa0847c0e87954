"""A publisher for NATS JetStream, on nats-py.

JetStream keeps what it acknowledged, and drops a message whose ``Nats-Msg-Id`` it
already holds from within the stream's duplicate window: the relay sets that header to
the outbox message id, so a batch published again after a relay crash or a lost ack is
stored once. Configure it with::

    EVENTFERRY = {"PUBLISHER": {
        "BACKEND": "eventferry_django.publishers.nats.NatsPublisher",
        "OPTIONS": {"servers": "nats://127.0.0.1:4222", "stream": "ORDERS"},
    }}

The connection and the pipelined batches are
:mod:`~eventferry_django.publishers.nats_link`'s; this module turns rows into NATS
messages and says which ones can never be sent.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from django.core.checks import CheckMessage

from .base import OutboundMessage, Outcome, Publisher, PublishResult, json_text, mask_url
from .message_format import NATS_BINDING, Envelope, MessageFormat
from .nats_link import NatsLink, NatsSettings, Wire
from .options import (
    Option,
    OptionTable,
    is_name,
    positive_seconds,
    raise_if_serious,
)
from .templates import TEMPLATE_FIELDS, is_template, key_function, key_problem

__all__ = ["OPTIONS", "NatsPublisher"]

SERVERS_REQUIRED = "a NATS server URL, or a list of them, is required, e.g. 'nats://127.0.0.1:4222'"
SCHEMES = ("nats", "tls", "ws", "wss")

#: One token of a subject a message can be published to: no dot, whitespace or control
#: character; ``*`` and ``>`` alone are wildcards, which only subscribers may use.
_TOKEN = re.compile(r"[^\s\x00-\x1f\x7f.]+")
#: A header name NATS carries: printable ASCII but the colon.
_HEADER_NAME = re.compile(r"[!-9;-~]+")
#: A JetStream stream name: no whitespace, ``.``, ``*``, ``>`` or path separators.
_STREAM_NAME = re.compile(r"[^\s.*>/\\\x00-\x1f\x7f]+")
#: nats.connect() arguments the publisher decides: the relay does the reconnecting.
OWNED_CONNECT_OPTIONS = frozenset({
    "servers", "allow_reconnect", "connect_timeout", "max_reconnect_attempts",
    "reconnect_time_wait", "error_cb", "disconnected_cb", "closed_cb", "reconnected_cb",
    "io_loop", "loop",
})


class Unsendable(Exception):
    """This message, and only this one, cannot be sent: it gets GIVE_UP."""


def subject_problem(subject: str) -> str | None:
    """Why NATS would refuse to take a message on ``subject``, or None."""
    if all(_TOKEN.fullmatch(token) and token not in ("*", ">") for token in subject.split(".")):
        return None
    return (f"{subject[:80]!r} is not a subject a message can be published to (dot-separated"
            " tokens, none empty, no whitespace, no * or > wildcards)")


def covers(pattern: str, subject: str) -> bool:
    """Whether a stream subject ``pattern`` (``*`` one token, ``>`` the rest) takes
    ``subject``."""
    want, have = pattern.split("."), subject.split(".")
    for index, token in enumerate(want):
        if token == ">":
            return len(have) > index
        if index >= len(have) or token not in ("*", have[index]):
            return False
    return len(want) == len(have)


def header_text(name: str, value: object) -> str:
    """``value`` as a NATS header's text: strings as they are, other JSON values as
    compact JSON. NATS headers are lines of text, so a line break cannot travel."""
    if not _HEADER_NAME.fullmatch(name):
        raise Unsendable(f"header name {name!r} cannot be a NATS header (printable ASCII, "
                         "no colon or space)")
    text = value if isinstance(value, str) else json_text(value, compact=True)
    if "\r" in text or "\n" in text:
        raise Unsendable(f"header {name!r} holds a line break, which a NATS header cannot "
                         "carry")
    return text


def carried(name: str) -> bool:
    """Whether an event's own header travels: not ``Content-Type``, which the publisher
    sets, nor any ``Nats-`` one, which would steer JetStream (the message id, expected
    stream, rollups, message TTLs...)."""
    lowered = name.lower()
    return lowered != "content-type" and not lowered.startswith("nats-")


def nats_headers(message_id: str, envelope: Envelope, stream: str | None) -> dict[str, str]:
    """The envelope's headers, then the content type, ``Nats-Msg-Id`` (JetStream's
    deduplication key) and, with a stream configured, ``Nats-Expected-Stream``."""
    headers = {name: header_text(name, value) for name, value in envelope.headers.items()
               if carried(name)}
    headers["Content-Type"] = envelope.content_type
    headers["Nats-Msg-Id"] = header_text("Nats-Msg-Id", message_id)
    if stream is not None:
        headers["Nats-Expected-Stream"] = stream
    return headers


def header_block_size(headers: Mapping[str, str]) -> int:
    """Bytes of the header block nats-py writes (``NATS/1.0``, ``name: value`` lines,
    a blank line), which the server counts against ``max_payload`` with the body."""
    return 12 + sum(len(k.strip().encode()) + len(v.strip().encode()) + 4
                    for k, v in headers.items())


def mask_server(url: str) -> str:
    """``url`` without its password, or without its token (``nats://TOKEN@host``)."""
    masked = mask_url(url)
    scheme, found, rest = masked.partition("://")
    userinfo, at, host = rest.partition("@")
    if found and at and ":" not in userinfo:
        return f"{scheme}://****@{host}"
    return masked


def _nats_installed() -> bool:
    try:
        importlib.import_module("nats.js")
    except ImportError:
        return False
    return True


def _servers_problem(value: object) -> str | None:
    urls = [value] if isinstance(value, str) else value
    if not isinstance(urls, list | tuple) or not urls or not all(is_name(u) for u in urls):
        return SERVERS_REQUIRED
    for url in urls:
        scheme, found, _ = str(url).partition("://")
        if found and scheme not in SCHEMES:
            return (f"{mask_server(str(url))} is not a NATS URL: its scheme must be one of "
                    f"{', '.join(s + '://' for s in SCHEMES)}")
    return None


def _subject_problem(value: object) -> str | None:
    problem = key_problem(value)
    if problem is None and is_template(value):
        sample = str(value).format_map({field: "x" for field in TEMPLATE_FIELDS})
        refused = subject_problem(sample)
        if refused is not None:
            return f"renders subjects like {sample!r}, which NATS refuses: {refused}"
    return problem


def _stream_problem(value: object) -> str | None:
    if value is None or (isinstance(value, str) and _STREAM_NAME.fullmatch(value)):
        return None
    return "must be None or a JetStream stream name (no whitespace, '.', '*', '>', '/' or '\\')"


def _connect_options_problem(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        return "must be a dict of nats.connect() keyword arguments"
    owned = sorted(OWNED_CONNECT_OPTIONS & set(value))
    if owned:
        return (f"sets {owned}, which the publisher decides: it connects with one try per "
                "server and leaves reconnecting to the relay")
    return None


#: NatsPublisher's OPTIONS, declared once: ``check()`` and the constructor's defaults.
OPTIONS = OptionTable((
    Option("servers", "eventferry.E082", _servers_problem, required=SERVERS_REQUIRED,
           required_id="eventferry.E080", is_url=True),
    Option("subject", "eventferry.E082", _subject_problem),
    Option("stream", "eventferry.E082", _stream_problem),
    Option("connect_timeout", "eventferry.E082", positive_seconds, default=5),
    Option("publish_timeout", "eventferry.E082", positive_seconds, default=10),
    Option("connect_options", "eventferry.E082", _connect_options_problem),
), unknown_id="eventferry.E081")


class NatsPublisher(Publisher):
    """Publishes each message to NATS JetStream, a batch pipelined, its acks awaited once.

    OPTIONS:

    ``servers`` (required)
        A NATS URL (``nats://user:password@host:4222``, ``tls://``, ``ws://``,
        ``wss://``) or a list of them, tried in nats-py's shuffled order when connecting
        (twice each at most; then the relay backs off and tries again).
    ``subject`` (``"{topic}"``)
        A format string using ``{topic}``, ``{aggregate_type}``, ``{aggregate_id}`` and
        ``{partition_key}``, or the dotted path of (or a reference to) a callable
        ``(OutboundMessage) -> str``, as kombu's ``routing_key``.
    ``stream`` (None)
        The JetStream stream the subjects belong to. When given, the publisher looks it
        up on connecting (a missing stream is an outage: nothing can be delivered until
        it exists), refuses a message whose subject the stream does not take
        (``GIVE_UP``, not sent) and sends ``Nats-Expected-Stream``, so JetStream refuses
        what another stream would take.
    ``connect_timeout`` (5), ``publish_timeout`` (10)
        Seconds: to reach a server; for a whole batch's acks (and a stream lookup).
    ``connect_options`` (None)
        More ``nats.connect()`` keyword arguments: ``user_credentials``, ``tls``,
        ``token``, ``nkeys_seed``, ``name``... (not the reconnection ones).

    Each message: the body is the row's payload text as UTF-8 (CloudEvents structured
    mode: the document), headers the event's own and the reserved ones
    (:func:`~.base.broker_headers`; CloudEvents binary mode: ``ce-`` headers after the
    NATS binding), non-string values as compact JSON, plus ``Content-Type`` and
    ``Nats-Msg-Id`` = the outbox message id. An event's own ``Nats-*`` and
    ``Content-Type`` headers are left out.

    Outcomes: acked by JetStream -> ``OK`` (a duplicate too: the stream has it); no
    stream answered (no responders) -> ``GIVE_UP`` only when ``stream`` is not given and
    JetStream, asked, names no stream for the subject, else the batch is an outage (a
    stream deleted, restarting or electing a leader, a server shutting down: the stream
    is looked up again before the next batch); larger than the
    server's ``max_payload`` (body and headers), a subject NATS refuses, a header it
    cannot carry, too large for the stream, the wrong stream -> ``GIVE_UP``; any other
    JetStream error (storage full, limits, no quorum) -> ``RETRY``, with JetStream's
    reason in ``last_error``. A server that cannot be reached, a connection lost
    mid-batch, acks that do not all arrive within ``publish_timeout`` and a missing
    ``stream`` raise :class:`~.base.BrokerUnavailable`: no attempt is spent, the
    connection is dropped and the next batch connects afresh.

    Order: a batch is written in the order given on one connection, and a stream stores
    what one connection publishes in that order; so an aggregate's events are in the
    stream in id order. A batch published again keeps its first copy's place (the
    duplicate is dropped, not appended).
    """

    def __init__(self, **options: Any) -> None:
        given = {**OPTIONS.defaults(), **options}
        super().__init__(**given)
        raise_if_serious(self.check(given))
        servers: str | Sequence[str] = given["servers"]  # check() reported E080 if missing
        self.settings = NatsSettings(
            servers=(servers,) if isinstance(servers, str) else tuple(servers),
            stream=given["stream"], connect_timeout=float(given["connect_timeout"]),
            publish_timeout=float(given["publish_timeout"]),
            connect_options=dict(given["connect_options"] or {}),
        )
        self.subject = key_function(given["subject"])
        self.message_format = MessageFormat.from_settings(NATS_BINDING)
        self.link = NatsLink(self.settings, ", ".join(map(mask_server, self.settings.servers)))
        self._lock = threading.Lock()

    @classmethod
    def check(cls, options: Mapping[str, Any]) -> list[CheckMessage]:
        """The OPTIONS table's checks (connecting nowhere), and nats-py importable."""
        messages = cls.missing_dependency(_nats_installed(), "nats-py", "nats",
                                          "eventferry.E083")
        return messages + OPTIONS.check(cls, options)

    def describe(self) -> str:
        subject = self.options["subject"] or "{topic}"
        if not isinstance(subject, str):
            subject = getattr(subject, "__qualname__", repr(subject))
        stream = f" stream {self.settings.stream!r}" if self.settings.stream else ""
        return f"NatsPublisher {self.link.where} subject {subject!r}{stream}"

    @property
    def duplicates(self) -> int:
        """How many acks so far said the stream held the message already."""
        return self.link.duplicates

    def publish(self, messages: Sequence[OutboundMessage]) -> list[PublishResult]:
        if not messages:
            return []
        wires = [self._wire(message) for message in messages]
        with self._lock:
            return self.link.run(wires, self._refusal)

    def close(self) -> None:
        with self._lock:
            self.link.close()

    def _wire(self, message: OutboundMessage) -> Wire | PublishResult:
        """The message as it goes out, or ``GIVE_UP`` saying why it cannot."""
        envelope = self.message_format.envelope(message)
        try:
            subject = self.subject(message)
            if not isinstance(subject, str):
                raise Unsendable(f"subject returned {subject!r}, not a string")
            problem = subject_problem(subject)
            if problem is not None:
                raise Unsendable(problem)
            headers = nats_headers(message.message_id, envelope, self.settings.stream)
            body = envelope.body.encode("utf-8")
        except Unsendable as exc:
            return PublishResult(Outcome.GIVE_UP, str(exc))
        except Exception as exc:  # a user's subject callable or format spec, an encoding
            return PublishResult(Outcome.GIVE_UP, f"cannot make the message: {exc!r}")
        return Wire(subject, body, headers, len(body) + header_block_size(headers))

    def _refusal(self, wire: Wire, link: NatsLink) -> PublishResult | None:
        """A message the connected server or the stream would refuse: not sent. (Over
        ``max_payload`` the server would close the connection, failing the batch.)"""
        if wire.size > link.max_payload:
            return PublishResult(Outcome.GIVE_UP, (
                f"message is {wire.size} bytes with its headers, more than the server's "
                f"max_payload ({link.max_payload}); not sent"))
        subjects = link.stream_subjects
        if subjects is not None and not any(covers(p, wire.subject) for p in subjects):
            return PublishResult(Outcome.GIVE_UP, (
                f"subject {wire.subject!r} is not among stream {self.settings.stream!r}'s "
                f"subjects {subjects}; not sent"))
        return None
