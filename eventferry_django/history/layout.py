"""Where an archive keeps its parts, under one root path (local, HDFS, S3, ...)::

    ROOT/archive_run_id=RUN/topic=T/day=YYYY-MM-DD/part-*.parquet   a run's data
    ROOT/_manifests/RUN.json     the commit of RUN: written last, so a run without one
                                 never happened, whatever data it left
    ROOT/_purges/RUN.json        RUN's archived rows were purged from the outbox
    ROOT/_staging/archive_run_id=RUN/...   a run being written
    ROOT/_lock                   held by the archive run in progress
    ROOT/_erasures/ID.json       one erasure: when, which aggregate, how many rows
    ROOT/_erasing/ID/            the Parquet files an erasure is rewriting

A Delta archive (:mod:`.delta`) adds ``ROOT/_delta_log/`` and ``ROOT/_commits/``.

Spark's partition discovery skips names that start with ``_`` or ``.``, so staging,
manifests and the lock never look like data to ``spark.read.parquet(ROOT)``. Run ids
sort by time.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
from dataclasses import dataclass

RUN_PARTITION = "archive_run_id"
RUN_ID_PATTERN = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{8}$")


def new_run_id(now: dt.datetime) -> str:
    return f"{now.astimezone(dt.UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"


@dataclass(frozen=True)
class ArchiveLayout:
    root: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", self.root.rstrip("/") or "/")

    def _join(self, *parts: str) -> str:
        return "/".join((self.root if self.root != "/" else "", *parts))

    @property
    def manifests(self) -> str:
        return self._join("_manifests")

    @property
    def purges(self) -> str:
        return self._join("_purges")

    @property
    def staging(self) -> str:
        return self._join("_staging")

    @property
    def lock(self) -> str:
        return self._join("_lock")

    @property
    def delta_log(self) -> str:
        return self._join("_delta_log")

    @property
    def commits(self) -> str:
        return self._join("_commits")

    @property
    def erasures(self) -> str:
        return self._join("_erasures")

    def commit_record(self, run_id: str) -> str:
        return self._join("_commits", f"{run_id}.json")

    def erasure_staging(self, erasure_id: str) -> str:
        return self._join("_erasing", erasure_id)

    def erasure_record(self, erasure_id: str) -> str:
        return self._join("_erasures", f"{erasure_id}.json")

    def run_dir(self, run_id: str) -> str:
        return self._join(f"{RUN_PARTITION}={run_id}")

    def staging_dir(self, run_id: str) -> str:
        return self._join("_staging", f"{RUN_PARTITION}={run_id}")

    def manifest(self, run_id: str) -> str:
        return self._join("_manifests", f"{run_id}.json")

    def purge_record(self, run_id: str) -> str:
        return self._join("_purges", f"{run_id}.json")

    @staticmethod
    def run_id_of(name: str) -> str | None:
        """The run id in a run directory's or a record's file name, if it is one."""
        stem = name.removeprefix(f"{RUN_PARTITION}=").removesuffix(".json")
        return stem if RUN_ID_PATTERN.match(stem) else None
