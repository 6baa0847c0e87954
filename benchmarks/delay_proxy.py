#!/usr/bin/env python
"""A TCP proxy that adds latency: what ``tc netem delay`` does, for kernels without it.

    python benchmarks/delay_proxy.py LISTEN_PORT TARGET_HOST TARGET_PORT ONE_WAY_MS

Listens on ``127.0.0.1:LISTEN_PORT`` and forwards every connection to the target; each
chunk read from either side is written to the other ``ONE_WAY_MS`` after it arrived, in
order, so a request and its answer cost the round trip while a stream keeps flowing (no
bandwidth limit, as netem's delay alone). One process and one event loop for every
connection; :mod:`benchmarks.far` runs one per server.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

CHUNK = 256 * 1024


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float
               ) -> None:
    """Copy ``reader`` to ``writer``, each chunk ``delay`` seconds after it was read."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            if (wait := due - loop.time()) > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(send())
    try:
        while data := await reader.read(CHUNK):
            queue.put_nowait((loop.time() + delay, data))
        queue.put_nowait((loop.time() + delay, b""))
        await sender
    finally:
        sender.cancel()
        with contextlib.suppress(Exception):
            writer.close()


async def serve(port: int, host: str, target_port: int, delay: float) -> None:
    async def connect(client_reader: asyncio.StreamReader,
                      client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(host, target_port)
        except OSError:
            client_writer.close()
            return
        for stream in (client_writer, server_writer):
            sock = stream.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(6, 1, 1)  # TCP_NODELAY: no Nagle wait on top of the delay
        with contextlib.suppress(Exception):
            await asyncio.gather(pump(client_reader, server_writer, delay),
                                 pump(server_reader, client_writer, delay))

    server = await asyncio.start_server(connect, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


def main() -> None:
    port, host, target_port, one_way_ms = sys.argv[1:5]
    asyncio.run(serve(int(port), host, int(target_port), float(one_way_ms) / 1000))


if __name__ == "__main__":
    main()
