"""What :class:`~eventferry_django.publishers.nats.NatsPublisher` runs on: nats-py's
asyncio client, driven from the relay's synchronous publishing thread.

:class:`LoopThread` owns one event loop on a daemon thread of its own. The connection
lives on that loop for as long as the publisher does: between batches the client still
answers the server's PINGs and notices a closed socket, which a loop run only during
``publish()`` would not. The relay's thread hands each batch over with
``run_coroutine_threadsafe`` and waits for its outcome.

:class:`NatsLink` owns the connection. A batch is pipelined: every message is written
with a reply subject of its own under one inbox that the link subscribes to once, and
the acks are collected as they come (:class:`AckBatch`), so a batch costs one round
trip. It does not use nats-py's ``publish_async``: up to 2.15 an error the stream
answers (a message too large, a wrong expected stream) escapes its reply handler and
leaves the ack's future pending forever (nats-io/nats.py#985), which would turn one bad
message into a batch that never settles. The link reads JetStream's replies itself.

Reconnection is the relay's: the client is made with ``allow_reconnect=False``, so a lost
server closes it, and the next batch connects afresh. nats-py's own reconnect would
buffer publishes during an outage and flush them into the next server behind the relay's
back, after the relay had already handed the batch back.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import logging
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..conf import get_settings
from .base import BrokerUnavailable, Outcome, PublishResult

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: JetStream errors no retry can cure: too large for the stream, or the
#: ``Nats-Expected-Stream`` header names another stream than the one that took it.
PERMANENT_ERRORS = {10054: "too large for the stream", 10056: "stream mismatch",
                    10060: "the subject belongs to another stream"}


def nats() -> Any:
    """The ``nats`` package, imported on first use so this module imports without it.
    Typed as Any, as kombu is: strict mypy would reject nats-py's partly annotated API
    call by call."""
    return importlib.import_module("nats")


@dataclass(frozen=True)
class NatsSettings:
    """NatsPublisher's OPTIONS, validated and typed."""

    servers: tuple[str, ...]
    stream: str | None
    connect_timeout: float
    publish_timeout: float
    connect_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Wire:
    """One message as it goes out: subject, body and headers, already checked."""

    subject: str
    body: bytes
    headers: dict[str, str]
    #: Body and header block together, as the server counts them against max_payload.
    size: int


#: A last look at one message, knowing the server: its refusal, or None to send it.
Refusal = Callable[[Wire, "NatsLink"], "PublishResult | None"]


class LoopThread:
    """One asyncio event loop on a daemon thread, started on first use."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coroutine`` on the loop and wait for it, at most ``timeout`` seconds (a
        backstop: the coroutines bound their own waits)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name=self.name,
                                            daemon=True)
            self._thread.start()
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            if not future.done():
                future.cancel()
                raise BrokerUnavailable(f"NATS did not answer within {timeout}s") from None
            raise

    def stop(self) -> None:
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        if not thread.is_alive():
            loop.close()


class AckBatch:
    """The replies one pipelined batch waits for; message ``index`` was published with
    the reply subject ``<inbox>.<batch>.<index>``."""

    def __init__(self, number: int, size: int, inbox: str) -> None:
        self.number = number
        self.inbox = inbox
        self.results: list[PublishResult | None] = [None] * size
        self.waiting: set[int] = set()
        self.duplicates = 0
        #: Messages no stream answered for (503, no responders); what that means is
        #: asked of JetStream once every reply is in (:meth:`NatsLink._settle_unrouted`).
        self.unrouted: list[int] = []
        #: Still writing: an ack may come in before the last message is written, and
        #: the batch is complete only when nothing waits once all are written.
        self.sending = True
        self.complete = asyncio.Event()

    def reply_to(self, index: int) -> str:
        self.waiting.add(index)
        return f"{self.inbox}.{self.number}.{index}"

    def answer(self, index: int, status: str | None, data: bytes) -> None:
        if index not in self.waiting:
            return
        self.waiting.discard(index)
        if status == "503":
            self.unrouted.append(index)
        else:
            self.results[index] = self._result(data)
        if not self.waiting and not self.sending:
            self.complete.set()

    def _result(self, data: bytes) -> PublishResult:
        try:
            reply = json.loads(data)
        except ValueError:
            return PublishResult(Outcome.RETRY, f"unreadable JetStream reply {data[:80]!r}")
        error = reply.get("error") if isinstance(reply, dict) else None
        if error is None:
            self.duplicates += bool(reply.get("duplicate"))
            return PublishResult.ok()
        code = error.get("err_code")
        text = (f"JetStream refused it: {error.get('description')} (code {error.get('code')}, "
                f"err_code {code})")
        if code in PERMANENT_ERRORS:
            return PublishResult(Outcome.GIVE_UP, f"{text}: {PERMANENT_ERRORS[code]}")
        return PublishResult(Outcome.RETRY, text)

    async def wait(self, lost: asyncio.Event, timeout: float) -> str | None:
        """Once all is written: None when every reply is in; else why not (the
        connection lost, or time)."""
        self.sending = False
        if not self.waiting:
            return None
        waiters = [asyncio.ensure_future(self.complete.wait()),
                   asyncio.ensure_future(lost.wait())]
        await asyncio.wait(waiters, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for waiter in waiters:
            waiter.cancel()
        if self.complete.is_set():
            return None
        if lost.is_set():
            return "the connection was lost"
        return f"{len(self.waiting)} of {len(self.results)} acks missing after {timeout}s"


class NatsLink:
    """One NATS connection with its reply inbox, opened on first use, dropped on any
    failure; it lives on ``loop``: :meth:`run` and :meth:`close` hand their work over."""

    def __init__(self, settings: NatsSettings, describe: str) -> None:
        self.settings = settings
        self.where = describe
        self.loop = LoopThread("eventferry-nats")
        self._client: Any = None
        self._lost = asyncio.Event()
        self._inbox = ""
        self._batch: AckBatch | None = None
        self._batches = 0
        #: The configured stream's subjects, once looked up on this connection.
        self.stream_subjects: list[str] | None = None
        self.duplicates = 0

    def run(self, wires: Sequence[Wire | PublishResult], refuse: Refusal
            ) -> list[PublishResult]:
        """Publish ``wires`` (a ready result stands for a message refused already);
        ``refuse(wire, link)`` may still refuse one, knowing the server's limits."""
        settings = self.settings
        backstop = 2 * (settings.publish_timeout
                        + 2 * settings.connect_timeout * len(settings.servers)) + 5
        return self.loop.run(self._send(wires, refuse), backstop)

    @property
    def max_payload(self) -> int:
        return int(self._client.max_payload)

    async def _send(self, wires: Sequence[Wire | PublishResult], refuse: Refusal
                    ) -> list[PublishResult]:
        await self._connect()
        self._batches += 1
        batch = self._batch = AckBatch(self._batches, len(wires), self._inbox)
        try:
            for index, wire in enumerate(wires):
                if isinstance(wire, PublishResult):
                    batch.results[index] = wire
                elif (refused := refuse(wire, self)) is not None:
                    batch.results[index] = refused
                else:
                    await self._client.publish(wire.subject, wire.body, headers=wire.headers,
                                               reply=batch.reply_to(index))
            problem = await batch.wait(self._lost, self.settings.publish_timeout)
            if problem is None and batch.unrouted:
                problem = await self._settle_unrouted(batch, wires)
        except (OSError, nats().errors.Error) as exc:
            problem = repr(exc)
        finally:
            self._batch = None
        if problem is not None:
            await self._drop()
            raise BrokerUnavailable(f"NATS at {self.where}: {problem}")
        self.duplicates += batch.duplicates
        return [r if r is not None else PublishResult.ok() for r in batch.results]

    async def _settle_unrouted(self, batch: AckBatch, wires: Sequence[Wire | PublishResult]
                               ) -> str | None:
        """Give up a message no stream answered for (503, no responders) only when
        JetStream names no stream for its subject; else say why the batch is an outage.

        A stream being deleted, restarted or electing a leader answers 503 too, and so
        does a server shutting down, which stops JetStream before it closes connections:
        giving up then would bury good events, and retrying would spend their attempts.
        A configured ``stream`` was looked up to take the subject, so its 503 is always
        an outage; the next batch looks it up again."""
        stream = self.settings.stream
        if stream is not None:
            return (f"stream {stream!r} did not answer (no responders): deleted, "
                    "restarting or electing a leader")
        owners: dict[str, str | None] = {}
        for index in batch.unrouted:
            wire = wires[index]
            assert isinstance(wire, Wire)  # only sent messages get replies
            if wire.subject not in owners:
                try:
                    owners[wire.subject] = await self._stream_taking(wire.subject)
                except (OSError, TimeoutError, nats().errors.Error) as exc:
                    return (f"no stream answered for {wire.subject!r}, and JetStream did "
                            f"not say which takes it (is JetStream on?): {exc!r}")
            owner = owners[wire.subject]
            if owner is not None:
                return (f"stream {owner!r} takes {wire.subject!r} but did not answer "
                        "(no responders): restarting or electing a leader")
            batch.results[index] = PublishResult(
                Outcome.GIVE_UP, "no JetStream stream takes this subject (no responders, "
                "and JetStream names none)")
        return None

    async def _stream_taking(self, subject: str) -> str | None:
        """The stream JetStream says takes ``subject``, None when it says none does."""
        not_found = importlib.import_module("nats.js.errors").NotFoundError
        manager = self._client.jetstream(timeout=self.settings.publish_timeout)
        try:
            return str(await manager.find_stream_name_by_subject(subject))
        except not_found:
            return None

    async def _connect(self) -> None:
        if self._client is not None and self._client.is_connected:
            if self.settings.stream is not None and self.stream_subjects is None:
                await self._look_at_stream()
            return
        await self._drop()
        settings, lost, client = self.settings, asyncio.Event(), nats()
        self._lost = lost

        async def on_lost() -> None:
            lost.set()

        async def on_error(exc: Exception) -> None:
            # Connection failures reach the relay as BrokerUnavailable; the rest (a
            # permissions violation, say) would otherwise show only as missing acks.
            errors = client.errors
            quiet = isinstance(exc, (OSError, TimeoutError, errors.NoServersError,
                                     errors.UnexpectedEOF, errors.StaleConnectionError,
                                     errors.ConnectionClosedError))
            logger.log(logging.DEBUG if quiet else logging.WARNING, "NATS at %s: %r",
                       self.where, exc)

        try:
            self._client = await asyncio.wait_for(client.connect(
                servers=list(settings.servers), allow_reconnect=False,
                connect_timeout=settings.connect_timeout, max_reconnect_attempts=1,
                reconnect_time_wait=0, error_cb=on_error, disconnected_cb=on_lost,
                closed_cb=on_lost, **{"name": "eventferry-relay", **settings.connect_options},
            ), 2 * settings.connect_timeout * len(settings.servers))
            self._inbox = self._client.new_inbox()
            await self._client.subscribe(self._inbox + ".>", cb=self._on_reply)
        except (OSError, TimeoutError, client.errors.Error) as exc:
            await self._drop()
            raise BrokerUnavailable(f"Cannot connect to NATS at {self.where}: {exc!r}") from exc
        if settings.stream is not None:
            await self._look_at_stream()

    async def _look_at_stream(self) -> None:
        """Read the configured stream's subjects; a stream that does not exist, or a
        JetStream that does not answer, is an outage: nothing can be delivered."""
        stream, errors = self.settings.stream, importlib.import_module("nats.js.errors")
        try:
            info = await self._client.jetstream(
                timeout=self.settings.publish_timeout).stream_info(stream)
        except errors.NotFoundError as exc:
            await self._drop()
            raise BrokerUnavailable(
                f"JetStream stream {stream!r} does not exist at {self.where}: create it "
                "with subjects covering OPTIONS['subject'], or correct OPTIONS['stream']"
            ) from exc
        except (OSError, TimeoutError, nats().errors.Error) as exc:
            await self._drop()
            raise BrokerUnavailable(f"JetStream at {self.where} did not tell stream "
                                    f"{stream!r}'s subjects (is JetStream on?): {exc!r}"
                                    ) from exc
        self.stream_subjects = list(info.config.subjects or [])
        warn_if_window_short(stream, info.config.duplicate_window,
                             self.settings.publish_timeout)

    async def _on_reply(self, msg: Any) -> None:
        batch, tokens = self._batch, msg.subject.rsplit(".", 2)
        if batch is None or len(tokens) != 3 or tokens[1] != str(batch.number):
            return  # a late reply to a batch already given up on
        status = msg.headers.get("Status") if msg.headers else None
        batch.answer(int(tokens[2]), status, msg.data)

    async def _drop(self) -> None:
        """Forget the connection; close it without waiting long for a dead server."""
        client, self._client, self.stream_subjects = self._client, None, None
        if client is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), self.settings.connect_timeout)

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(BrokerUnavailable):
                self.loop.run(self._drop(), self.settings.connect_timeout + 1)
        self.loop.stop()


def warn_if_window_short(stream: str | None, window: float | None, publish_timeout: float
                         ) -> None:
    """Warn when the stream's duplicate window cannot cover a republish after a relay
    crash: another relay takes the rows back up to ``CLAIM_TIMEOUT`` plus a tenth of it
    after they were sent, and publishes them within a batch's time."""
    claim_timeout = get_settings().claim_timeout
    needed = 1.1 * claim_timeout + publish_timeout
    if window is not None and 0 < window < needed:
        logger.warning(
            "JetStream stream %r drops duplicates for %.0fs, less than the %.0fs after "
            "which a crashed relay's batch may be published again (1.1 x CLAIM_TIMEOUT "
            "%.0fs + publish_timeout); raise its duplicate_window", stream, window,
            needed, claim_timeout)
