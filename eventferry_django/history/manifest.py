"""What a committed archive run records, and what all committed runs say is archived.

A manifest is written last, after the run's Parquet was verified against the database;
its existence is the commit. It names the run, the frozen selection (cutoff, statuses,
id range), the row count and the id checksum, so every reader and every later run can
check and reason about the run without reading its data.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..contract import CLOSED, STATUS_CODES, STATUS_NAMES
from ..store.closed_rows import CHECKSUM_MODULI, ArchivedSpan
from .errors import HistoryError

FORMAT_VERSION = 1


def _closed_status(name: str) -> int:
    """The code of a closed status's name (only done and dead rows are archived)."""
    code = STATUS_CODES[name]
    if code not in CLOSED:
        raise ValueError(f"status {name!r} is not a closed status")
    return code


def _time_text(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(dt.UTC)


@dataclass(frozen=True)
class Checksum:
    """Row count and id checksum: ``id_sum`` is the sum of ids, ``id_mix`` the sum of
    ``(id % 65521) * (id % 65519)``; with the count, a lost row and a duplicated one
    show up unless they agree on all three."""

    rows: int
    id_sum: int
    id_mix: int

    def describe(self) -> str:
        return f"{self.rows:,} rows, id sum {self.id_sum}, id mix {self.id_mix}"


@dataclass(frozen=True)
class Manifest:
    run_id: str
    cutoff: dt.datetime
    statuses: tuple[int, ...]
    min_id: int
    max_id: int
    checksum: Checksum
    topics: Mapping[str, int]
    committed_at: dt.datetime
    source: Mapping[str, str] = field(default_factory=dict)

    @property
    def span(self) -> ArchivedSpan:
        return ArchivedSpan(self.max_id, self.cutoff, self.statuses)

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "run_id": self.run_id,
            "committed_at": _time_text(self.committed_at),
            "cutoff": _time_text(self.cutoff),
            "statuses": [STATUS_NAMES[s] for s in self.statuses],
            "min_id": self.min_id,
            "max_id": self.max_id,
            **asdict(self.checksum),
            "checksum": f"sum(id); sum((id % {CHECKSUM_MODULI[0]}) * (id % {CHECKSUM_MODULI[1]}))",
            "topics": dict(sorted(self.topics.items())),
            "source": dict(self.source),
        }
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, where: str) -> Manifest:
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT_VERSION:
                raise ValueError(f"format {data.get('format')!r} is not {FORMAT_VERSION}")
            return cls(
                run_id=str(data["run_id"]),
                cutoff=_parse_time(data["cutoff"]),
                statuses=tuple(_closed_status(s) for s in data["statuses"]),
                min_id=int(data["min_id"]),
                max_id=int(data["max_id"]),
                checksum=Checksum(int(data["rows"]), int(data["id_sum"]), int(data["id_mix"])),
                topics={str(k): int(v) for k, v in data["topics"].items()},
                committed_at=_parse_time(data["committed_at"]),
                source={str(k): str(v) for k, v in data.get("source", {}).items()},
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise HistoryError(f"The manifest {where} is not one this version reads: {exc}. "
                               "Move it away if it does not belong to this archive.") from None


@dataclass(frozen=True)
class PurgeRecord:
    """A committed run's archived rows were purged: every one was deleted or had
    changed (redriven, re-processed) or was gone already."""

    run_id: str
    purged_at: dt.datetime
    deleted: int
    kept: int

    def to_json(self) -> str:
        return json.dumps({"run_id": self.run_id, "purged_at": _time_text(self.purged_at),
                           "deleted": self.deleted, "kept": self.kept}, indent=2) + "\n"


def archived_spans(manifests: Iterable[Manifest]) -> tuple[ArchivedSpan, ...]:
    """What the committed runs hold, as few spans as say the same.

    Run n archived every row of its selection with an id up to its ``max_id``; the rows
    of that selection below its ``min_id`` were in earlier runs already. So the rows
    archived by runs 1..n are those inside any run's span (``id <= max_id``,
    ``processed_at < cutoff``, status in its statuses), judged when each froze. Rows
    only ever leave a span afterwards (a closed row changes only by redrive, which
    resets processed_at to a later time, or by deletion), so the spans stay true.
    A span inside another (lower or equal on every bound) adds nothing and is dropped.
    """
    spans = {m.span for m in manifests}

    def covers(big: ArchivedSpan, small: ArchivedSpan) -> bool:
        return (big.max_id >= small.max_id and big.cutoff >= small.cutoff
                and set(big.statuses) >= set(small.statuses))

    kept = [s for s in spans if not any(o != s and covers(o, s) for o in spans)]
    return tuple(sorted(kept, key=lambda s: (s.max_id, s.cutoff, s.statuses)))
