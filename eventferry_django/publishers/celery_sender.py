"""Sending a batch of Celery task messages through a Celery app's broker connection: what
the Celery publisher and the Django task publisher share.

:class:`CelerySender` owns the app (imported on first use), one producer per batch, the
timeouts and the outage rule: a broker that cannot be reached fails the batch with
:class:`~.base.BrokerUnavailable`. What each message becomes (task name, argument,
headers, queue) is its caller's :class:`TaskCall`, or the caller's refusal.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.module_loading import import_string

from .base import BrokerUnavailable, OutboundMessage, Outcome, PublishResult, mask_url

#: Header names of Celery's task protocol 2. Celery lets headers passed to ``send_task``
#: override its own, so an event header called ``id`` or ``task`` would corrupt the task
#: message; such event headers are left out.
CELERY_HEADERS = frozenset({
    "lang", "task", "id", "shadow", "eta", "expires", "group", "group_index", "retries",
    "timelimit", "root_id", "parent_id", "argsrepr", "kwargsrepr", "origin",
    "ignore_result", "replaced_task_nesting", "stamped_headers", "stamps",
})


@dataclass(frozen=True)
class TaskCall:
    """One message as a Celery task: its name, its one argument, headers and queue (None:
    the app's routing decides). The task id is the message id."""

    name: str
    argument: Any
    headers: Mapping[str, Any] = field(default_factory=dict)
    queue: str | None = None


#: What a message becomes: a task call, or the result that refuses it.
ToCall = Callable[[OutboundMessage], "TaskCall | PublishResult"]


class CelerySender:
    """Sends task calls through the Celery app at ``app_path`` (None: Celery's current
    app), each send bounded by ``publish_timeout`` seconds. Calls are serialised by a
    lock, as a connection must not be shared between threads."""

    def __init__(self, app_path: str | None, publish_timeout: float) -> None:
        self.app_path = app_path
        self.publish_timeout = publish_timeout
        self._app: Any = None
        self._lock = threading.Lock()

    def app(self) -> Any:
        if self._app is None:
            self._app = (importlib.import_module("celery").current_app if self.app_path is None
                         else import_string(self.app_path))
        return self._app

    def broker(self) -> str:
        """The app's broker URL, password masked."""
        connection = self.app().connection_for_write()
        try:
            return mask_url(connection.as_uri(include_password=True))
        finally:
            connection.release()

    def send(self, messages: Sequence[OutboundMessage], to_call: ToCall
             ) -> list[PublishResult]:
        """Send each message as ``to_call`` makes it, in order, on one producer."""
        if not messages:
            return []
        exceptions = importlib.import_module("kombu.exceptions")
        with self._lock:
            app = self.app()
            connection = app.connection_for_write()
            errors = (
                exceptions.OperationalError, OSError,
                *connection.connection_errors, *connection.channel_errors,
            )
            uri = connection.as_uri()
            connection.release()  # only asked for its error classes; nothing was opened
            try:
                with app.producer_or_acquire() as producer:
                    return [self._send_one(app, producer, message, to_call(message), exceptions)
                            for message in messages]
            except errors as exc:
                raise BrokerUnavailable(
                    f"Celery could not reach its broker at {uri}: {exc!r}"
                ) from exc

    def _send_one(self, app: Any, producer: Any, message: OutboundMessage,
                  call: TaskCall | PublishResult, exceptions: Any) -> PublishResult:
        if isinstance(call, PublishResult):
            return call
        options: dict[str, Any] = {} if call.queue is None else {"queue": call.queue}
        try:
            app.send_task(
                call.name,
                args=[call.argument],
                kwargs={},
                task_id=message.message_id,
                headers={k: v for k, v in call.headers.items() if k not in CELERY_HEADERS},
                producer=producer,
                timeout=self.publish_timeout,
                confirm_timeout=self.publish_timeout,
                **options,
            )
        except exceptions.EncodeError as exc:
            return PublishResult(Outcome.GIVE_UP, f"Celery cannot encode the task: {exc!r}")
        return PublishResult.ok()
