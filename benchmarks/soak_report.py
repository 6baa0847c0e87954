"""The soak's verdict: what the writers wrote, the outbox holds and the consumer received.

Pure bookkeeping over the soak's record files (see :mod:`benchmarks.soak_writer` and
:mod:`benchmarks.soak_consumer`) and the outbox's final state; no servers involved, so the
rules can be read, and checked, apart from the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Written:
    """Every event the writers handed to ``publish_event``."""

    committed: dict[str, float] = field(default_factory=dict)  # message id -> commit time
    rolled_back: set[str] = field(default_factory=set)
    ambiguous: set[str] = field(default_factory=set)
    seq: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (aggregate, seq)

    @property
    def published(self) -> int:
        return len(self.committed) + len(self.rolled_back) + len(self.ambiguous)


def read_written(paths: Iterable[Path]) -> Written:
    written = Written()
    for path in paths:
        for line in path.read_text().splitlines():
            kind, message_id, aggregate, seq, at = line.split()
            written.seq[message_id] = (aggregate, int(seq))
            if kind == "C":
                written.committed[message_id] = float(at)
            elif kind == "R":
                written.rolled_back.add(message_id)
            else:
                written.ambiguous.add(message_id)
    return written


@dataclass(frozen=True)
class Delivery:
    message_id: str
    aggregate: str
    seq: int
    redelivered: bool
    at: float


def read_deliveries(path: Path) -> list[Delivery]:
    deliveries = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) != 5:  # a line cut short when the consumer stopped
            continue
        message_id, aggregate, seq, redelivered, at = parts
        deliveries.append(Delivery(message_id, aggregate, int(seq), redelivered == "1",
                                   float(at)))
    return deliveries


@dataclass(frozen=True)
class Check:
    """A figure with a bound: it passes when ``value <= limit`` (0 for a must-be-0 row)."""

    name: str
    value: int
    limit: int = 0

    @property
    def failed(self) -> bool:
        return self.value > self.limit

    def __str__(self) -> str:
        bound = f" (bound {self.limit:,})" if self.limit else ""
        return f"{self.name}={self.value:,}{bound}"


@dataclass
class Verdict:
    published: int
    rolled_back: int
    committed: int
    delivered: int
    lost: int
    phantoms: int
    duplicates: int
    redelivered_by_broker: int
    order_violations: int
    dead: int
    latencies_ms: list[float]
    first_commit: float
    last_delivery: float

    def checks(self, duplicates_bound: int) -> list[Check]:
        """The rows with a bound: each must-be-0 row, and the duplicates."""
        return [Check("lost", self.lost), Check("phantoms", self.phantoms),
                Check("duplicates", self.duplicates, duplicates_bound),
                Check("order violations", self.order_violations), Check("dead", self.dead)]

    def percentile(self, fraction: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]

    @property
    def throughput(self) -> float:
        span = self.last_delivery - self.first_commit
        return self.delivered / span if span > 0 else float("nan")


def order_violations(deliveries: Iterable[Delivery]) -> int:
    """First deliveries of an aggregate whose seq is below one already delivered."""
    highest: dict[str, int] = {}
    seen: set[str] = set()
    violations = 0
    for delivery in deliveries:
        if delivery.message_id in seen:
            continue
        seen.add(delivery.message_id)
        if delivery.seq < highest.get(delivery.aggregate, 0):
            violations += 1
        highest[delivery.aggregate] = max(highest.get(delivery.aggregate, 0), delivery.seq)
    return violations


def judge(written: Written, outbox: dict[str, int], dead_status: int,
          deliveries: list[Delivery]) -> Verdict:
    """``outbox`` maps every row's message id to its final status."""
    first: dict[str, Delivery] = {}
    fresh: Counter[str] = Counter()
    redelivered = 0
    for delivery in deliveries:
        first.setdefault(delivery.message_id, delivery)
        if delivery.redelivered:
            # The broker again, after the consumer's ack was lost to a broker restart:
            # not the relay's doing.
            redelivered += 1
        else:
            fresh[delivery.message_id] += 1
    # Committed, for sure: the rows the outbox holds, plus what the writers saw commit
    # (a committed event missing from the table is lost too).
    committed = set(outbox) | set(written.committed)
    lost = len(committed - first.keys())
    phantoms = sum(1 for m in first if m in written.rolled_back or m not in committed)
    phantoms += len(written.rolled_back & set(outbox))  # a rolled-back row in the table
    latencies = [(first[m].at - at) * 1000 for m, at in written.committed.items() if m in first]
    return Verdict(
        published=written.published,
        rolled_back=len(written.rolled_back),
        committed=len(committed),
        delivered=len(first),
        lost=lost,
        phantoms=phantoms,
        duplicates=sum(count - 1 for count in fresh.values() if count > 1),
        redelivered_by_broker=redelivered,
        order_violations=order_violations(deliveries),
        dead=sum(1 for status in outbox.values() if status == dead_status),
        latencies_ms=latencies,
        first_commit=min(written.committed.values(), default=0.0),
        last_delivery=max((d.at for d in first.values()), default=0.0),
    )


Row = tuple[str, str, str, str]
HEADER: Row = ("figure", "value", "must be", "verdict")


def row(figure: str, value: str, must_be: str = "", check: Check | None = None) -> Row:
    """A table row; a row with a ``check`` says ``ok`` or ``FAILED`` in its last column."""
    verdict = "" if check is None else "FAILED" if check.failed else "ok"
    return figure, value, must_be, verdict


def summary(checks: list[Check], other_failures: list[str]) -> str:
    """The last line: ``FAILED:`` naming each failed check and other failure, or
    ``passed:``."""
    failed = [str(check) for check in checks if check.failed] + other_failures
    if failed:
        return "FAILED: " + ", ".join(failed)
    return "passed: " + ", ".join(str(check) for check in checks)


def table(rows: Sequence[tuple[str, ...]], header: tuple[str, ...] = HEADER) -> str:
    widths = [max(len(cells[i]) for cells in [header, *rows]) for i in range(len(header))]
    lines = []
    for cells in [header, tuple("-" * w for w in widths), *rows]:
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True))
                     + " |")
    return "\n".join(lines)


