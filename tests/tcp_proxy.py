"""A TCP proxy that tests can break on purpose: the broker "goes away" without stopping it.

::

    with TcpProxy("127.0.0.1", 5672) as proxy:
        url = f"amqp://guest:guest@127.0.0.1:{proxy.port}//"
        ...
        proxy.cut()      # reset every open connection, refuse new ones
        proxy.restore()  # accept (and forward) again, on the same port
        proxy.stall()    # keep connections open but forward nothing: a hung peer

Threads, not asyncio, so it runs beside synchronous client code in any test.
"""

from __future__ import annotations

import socket
import struct
import threading
from types import TracebackType

_CHUNK = 64 * 1024
_POLL = 0.05  # seconds; how quickly the accept loop notices stop() and cut()


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``upstream_host:upstream_port``.

    ``port`` is chosen by the OS at :meth:`start` unless given. ``accepted`` counts the
    connections accepted so far, which tells a test whether a client reconnected.
    """

    def __init__(self, upstream_host: str, upstream_port: int, port: int = 0) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.port = port
        self.accepted = 0
        self._lock = threading.Lock()
        self._pairs: set[tuple[socket.socket, socket.socket]] = set()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._running = threading.Event()  # the accept loop should run
        self._flowing = threading.Event()  # pumps may forward bytes
        self._flowing.set()

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> TcpProxy:
        self._listen()
        return self

    def stop(self) -> None:
        """Close everything; the proxy cannot be restarted on the same port reliably."""
        self._stop_listening()
        self._flowing.set()
        self._close_pairs()

    def cut(self) -> None:
        """Reset every open connection (as if the broker crashed) and refuse new ones."""
        self._stop_listening()
        self._close_pairs(reset=True)

    def restore(self) -> None:
        """Undo :meth:`cut` and :meth:`stall`: accept and forward again, on the same port."""
        self._flowing.set()
        if self._listener is None:
            self._listen()

    def stall(self) -> None:
        """Keep connections open but stop forwarding: the peer seems alive and says nothing."""
        self._flowing.clear()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals -----------------------------------------------------------------

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(_POLL)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._running.set()
        self._accept_thread = threading.Thread(
            target=self._accept_loop, args=(listener,), name=f"tcp-proxy-{self.port}",
            daemon=True,
        )
        self._accept_thread.start()

    def _stop_listening(self) -> None:
        self._running.clear()
        if self._accept_thread is not None:
            self._accept_thread.join()
            self._accept_thread = None
        if self._listener is not None:
            self._listener.close()  # new connections are now refused
            self._listener = None

    def _accept_loop(self, listener: socket.socket) -> None:
        while self._running.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            pair = (client, upstream)
            with self._lock:
                self.accepted += 1
                self._pairs.add(pair)
            for source, target in (pair, (upstream, client)):
                threading.Thread(
                    target=self._pump, args=(pair, source, target), daemon=True,
                ).start()

    def _pump(
        self,
        pair: tuple[socket.socket, socket.socket],
        source: socket.socket,
        target: socket.socket,
    ) -> None:
        try:
            while True:
                data = source.recv(_CHUNK)
                if not data:
                    break
                while not self._flowing.wait(_POLL):
                    if pair not in self._pairs:  # cut or stopped while stalled
                        return
                target.sendall(data)
        except OSError:
            pass
        finally:
            self._close_pair(pair)

    def _close_pairs(self, reset: bool = False) -> None:
        with self._lock:
            pairs = list(self._pairs)
        for pair in pairs:
            self._close_pair(pair, reset=reset)

    def _close_pair(
        self, pair: tuple[socket.socket, socket.socket], reset: bool = False,
    ) -> None:
        with self._lock:
            if pair not in self._pairs:
                return
            self._pairs.discard(pair)
        for sock in pair:
            try:
                if reset:  # SO_LINGER 0: close() sends RST, the peer sees a reset
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                # Wakes the pump blocked in recv() on it; close() alone would not.
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
