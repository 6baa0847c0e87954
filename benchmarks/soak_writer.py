"""One soak writer process: business row + ``publish_event`` in one transaction, in a loop.

    python -m benchmarks.soak_writer --events N --aggregates 1000 --seed S --out FILE

Each transaction takes one account's row lock (``UPDATE ... seq = seq + k``), publishes
``k`` events (1 to ``--max-per-transaction``; one with ``publish_event``, several with
``publish_events``) whose payloads carry the account's new sequence numbers and a
padding of 100 B to 4 KB, and commits. Every ``--rollback-every``-th transaction raises after
publishing instead, so its events must never reach the broker. Each event gets one line
in ``--out``::

    C|R|A <message id> <aggregate> <seq> <unix time of the commit, or 0>

C committed, R rolled back, A ambiguous (the database failed during the transaction,
e.g. while it restarted: whether it committed is for the outbox table to say).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchmarks.soak_settings")

import django  # noqa: E402

django.setup()

from django.db import DatabaseError, InterfaceError, connection, transaction  # noqa: E402
from django.db.models import F  # noqa: E402

from benchmarks.benchapp.models import SoakAccount  # noqa: E402
from eventferry_django import NewEvent, publish_event, publish_events  # noqa: E402

TOPIC = "soak.step"
AGGREGATE_TYPE = "account"
PAD = "abcdefghijklmnopqrstuvwxyz0123456789" * 120


class Rollback(Exception):
    """Raised on purpose inside a transaction that must leave nothing behind."""


def one_transaction(rng: random.Random, account: int, count: int, rollback: bool,
                    sent: list[tuple[str, int]]) -> None:
    """Publish ``count`` events for ``account``, appending (message id, seq) of each to
    ``sent`` as it goes, so a failure part way still names what was written."""
    with transaction.atomic():
        SoakAccount.objects.filter(pk=account).update(seq=F("seq") + count,
                                                      balance=F("balance") + 1)
        last = SoakAccount.objects.values_list("seq", flat=True).get(pk=account)
        seqs = list(range(last - count + 1, last + 1))
        payloads = [{"account": account, "seq": seq, "pad": PAD[: rng.randint(100, 4000)]}
                    for seq in seqs]
        if count == 1:
            ids = [publish_event(TOPIC, payloads[0], aggregate_type=AGGREGATE_TYPE,
                                 aggregate_id=str(account))]
        else:
            ids = publish_events([NewEvent(TOPIC, payload, AGGREGATE_TYPE, str(account))
                                  for payload in payloads])
        sent.extend(zip(ids, seqs, strict=True))
        if rollback:
            raise Rollback


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--aggregates", type=int, default=1000)
    parser.add_argument("--max-per-transaction", type=int, default=8)
    parser.add_argument("--rollback-every", type=int, default=250)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping  # finish the transaction in hand, then stop
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    written = 0
    number = 0
    with args.out.open("w") as out:
        while written < args.events and not stopping:
            number += 1
            account = rng.randint(1, args.aggregates)
            count = min(rng.randint(1, args.max_per_transaction), args.events - written)
            rollback = number % args.rollback_every == 0
            sent: list[tuple[str, int]] = []
            try:
                one_transaction(rng, account, count, rollback, sent)
                kind, at = "C", time.time()
            except Rollback:
                kind, at = "R", 0.0
            except (DatabaseError, InterfaceError) as error:
                # The database went away mid-transaction (the soak restarts it): whether
                # the commit happened is unknown here; the outbox table will tell.
                print(f"writer: {error!r}", file=sys.stderr)
                connection.close()
                time.sleep(0.2)
                kind, at = "A", 0.0
            written += len(sent)
            out.write("".join(f"{kind} {mid} {account} {seq} {at:.6f}\n" for mid, seq in sent))
            if number % 50 == 0:
                out.flush()


if __name__ == "__main__":
    main()
