"""The soak's consumer process: records every delivery from one queue, through restarts.

    python -m benchmarks.soak_consumer --url AMQP_URL --queue Q --out FILE

One line per delivery, in delivery order::

    <message id> <aggregate> <seq> <redelivered 0|1> <unix time of arrival>

Acks are sent (``multiple``) only after the lines they cover are written and flushed, so a
broker restart can make the broker deliver a message again (flagged redelivered) but never
drop one this consumer took. When the broker goes away it reconnects until SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import IO, Any

import kombu

PREFETCH = 2000
ACK_EVERY = 500


class Recorder:
    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.unacked: Any = None
        self.pending = 0
        self.stopping = False

    def on_message(self, body: Any, message: Any) -> None:
        data = json.loads(message.body)
        redelivered = 1 if message.delivery_info.get("redelivered") else 0
        self.out.write(f"{message.properties['message_id']} {data['account']} {data['seq']} "
                       f"{redelivered} {time.time():.6f}\n")
        self.unacked = message
        self.pending += 1
        if self.pending >= ACK_EVERY:
            self.ack()

    def ack(self) -> None:
        if self.unacked is None:
            return
        self.out.flush()
        self.unacked.channel.basic_ack(self.unacked.delivery_tag, multiple=True)
        self.unacked, self.pending = None, 0


def consume(url: str, queue_name: str, recorder: Recorder) -> None:
    with kombu.Connection(url, heartbeat=10, connect_timeout=5) as conn:
        conn.ensure_connection(max_retries=1)
        queue = kombu.Queue(queue_name, no_declare=True)
        with conn.Consumer(queue, callbacks=[recorder.on_message], accept=None,
                           prefetch_count=PREFETCH, no_ack=False, auto_declare=False):
            while not recorder.stopping:
                try:
                    conn.drain_events(timeout=0.3)
                except TimeoutError:
                    recorder.ack()
                    conn.heartbeat_check()
            recorder.ack()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    with args.out.open("a") as out:
        recorder = Recorder(out)

        def stop(signum: int, frame: FrameType | None) -> None:
            recorder.stopping = True

        signal.signal(signal.SIGTERM, stop)
        while not recorder.stopping:
            try:
                consume(args.url, args.queue, recorder)
            except Exception as error:  # the broker restarts: reconnect, whatever broke
                # Unacked deliveries come again, flagged redelivered; forget their tags.
                recorder.unacked, recorder.pending = None, 0
                out.flush()
                print(f"consumer: {error!r}; reconnecting", file=sys.stderr)
                time.sleep(0.5)


if __name__ == "__main__":
    main()
