"""File operations on an archive through Hadoop's FileSystem, the one Spark itself
writes with, so a local path, ``hdfs://`` and ``s3a://`` behave alike.

Commits rely on two operations: a rename of the staging directory into place (atomic
on local and HDFS file systems; a copy on object stores, which the manifest written
after it makes safe), and a manifest written to a hidden name and renamed into place,
so no reader ever sees half a manifest.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .errors import ArchiveBusy, HistoryError
from .layout import ArchiveLayout
from .manifest import Manifest, PurgeRecord


class ArchiveFiles:
    """The files of one archive root, on the file system its URL names."""

    def __init__(self, spark: Any, root: str) -> None:
        jvm = spark._jvm
        self._path_class = jvm.org.apache.hadoop.fs.Path
        root_path = self._path_class(root)
        self.fs = root_path.getFileSystem(spark._jsc.hadoopConfiguration())
        self.layout = ArchiveLayout(str(self.fs.makeQualified(root_path).toString()))
        self._charset = jvm.java.nio.charset.StandardCharsets.UTF_8

    def _path(self, path: str) -> Any:
        return self._path_class(path)

    # -- primitives ----------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(self._path(path)))

    def names(self, directory: str) -> list[str]:
        """Names in ``directory`` (none if it does not exist), hidden ones excluded."""
        if not self.exists(directory):
            return []
        names = [status.getPath().getName() for status in self.fs.listStatus(self._path(directory))]
        return sorted(n for n in names if not n.startswith((".", "_")))

    def files_under(self, directory: str) -> list[str]:
        """The paths of every file below ``directory``, hidden ones (``.crc``) excluded."""
        found = []
        listing = self.fs.listFiles(self._path(directory), True)
        while listing.hasNext():
            path = listing.next().getPath()
            if not path.getName().startswith((".", "_")):
                found.append(str(path.toString()))
        return sorted(found)

    def size_and_mtime(self, path: str) -> tuple[int, int]:
        """A file's size in bytes and its modification time in epoch milliseconds."""
        status = self.fs.getFileStatus(self._path(path))
        return int(status.getLen()), int(status.getModificationTime())

    def read_text(self, path: str) -> str:
        stream = self.fs.open(self._path(path))
        try:
            data = bytes(stream.readAllBytes())
        finally:
            stream.close()
        return data.decode("utf-8")

    def _create(self, path: str, text: str, *, overwrite: bool) -> None:
        stream = self.fs.create(self._path(path), overwrite)
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        """Write ``path`` whole or not at all: a hidden temporary, then a rename."""
        final = self._path(path)
        temporary = self._path_class(final.getParent(), f".{final.getName()}.tmp")
        self._create(str(temporary), text, overwrite=True)
        if self.fs.exists(final):
            self.fs.delete(final, False)
        if not self.fs.rename(temporary, final):
            raise HistoryError(f"Could not rename {temporary} to {final}.")

    def delete(self, path: str) -> None:
        self.fs.delete(self._path(path), True)

    def rename(self, source: str, target: str) -> None:
        self.fs.mkdirs(self._path(target).getParent())
        if not self.fs.rename(self._path(source), self._path(target)):
            raise HistoryError(f"Could not rename {source} to {target}.")

    # -- the archive's records -------------------------------------------------------------
    def manifests(self) -> list[Manifest]:
        """Every committed run, oldest first."""
        found = []
        for name in self.names(self.layout.manifests):
            run_id = ArchiveLayout.run_id_of(name)
            if run_id is not None and name.endswith(".json"):
                path = self.layout.manifest(run_id)
                found.append(Manifest.from_json(self.read_text(path), path))
        return found

    def require_committed(self) -> list[Manifest]:
        """The committed runs, or an error if the path holds none: a reader pointed at
        the wrong place should hear so, not get an empty answer."""
        manifests = self.manifests()
        if not manifests:
            raise HistoryError(
                f"{self.layout.root} holds no committed archive run (nothing in "
                f"{self.layout.manifests}); give the path outbox_archive --to wrote."
            )
        return manifests

    def purged_runs(self) -> set[str]:
        return {run_id for name in self.names(self.layout.purges)
                if (run_id := ArchiveLayout.run_id_of(name)) is not None}

    def commit(self, manifest: Manifest) -> None:
        """Move the run's staging into place, then write its manifest: the commit."""
        self.rename(self.layout.staging_dir(manifest.run_id), self.layout.run_dir(manifest.run_id))
        self.write_text(self.layout.manifest(manifest.run_id), manifest.to_json())

    def retract(self, run_id: str) -> None:
        """Undo a commit whose files did not read back right: manifest first."""
        self.delete(self.layout.manifest(run_id))
        self.delete(self.layout.run_dir(run_id))

    def record_purge(self, record: PurgeRecord) -> None:
        self.write_text(self.layout.purge_record(record.run_id), record.to_json())

    def uncommitted(self, committed: set[str]) -> list[str]:
        """Directories left by runs that never committed: their staging, and a run
        directory moved into place just before a crash stopped its manifest."""
        leftovers = [f"{self.layout.staging}/{name}" for name in self.names(self.layout.staging)]
        for name in self.names(self.layout.root):
            run_id = ArchiveLayout.run_id_of(name)
            if run_id is not None and run_id not in committed:
                leftovers.append(self.layout.run_dir(run_id))
        return leftovers

    # -- the lock ----------------------------------------------------------------------------
    @contextmanager
    def locked(self, run_id: str) -> Iterator[None]:
        """Hold the archive's lock for one run. A lock left by a process of this host
        that is gone (killed, crashed) is taken over; any other is respected."""
        owner = {"run_id": run_id, "host": socket.gethostname(), "pid": os.getpid(),
                 "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
        if not self._try_lock(owner):
            holder = self._lock_holder()
            if holder is not None and _is_dead_local_process(holder):
                self.delete(self.layout.lock)
            if not self._try_lock(owner):
                raise ArchiveBusy(
                    f"{self.layout.lock} is held by {self._lock_holder() or 'another run'}: "
                    "another outbox_archive is writing this archive. If no such run is "
                    "alive, delete that file and run again."
                )
        try:
            yield
        finally:
            self.delete(self.layout.lock)

    def _try_lock(self, owner: dict[str, Any]) -> bool:
        if not self.fs.createNewFile(self._path(self.layout.lock)):
            return False
        self._create(self.layout.lock, json.dumps(owner) + "\n", overwrite=True)
        return True

    def _lock_holder(self) -> dict[str, Any] | None:
        try:
            holder = json.loads(self.read_text(self.layout.lock))
        except Exception:  # gone meanwhile, or still being written
            return None
        return holder if isinstance(holder, dict) else None


def _is_dead_local_process(holder: dict[str, Any]) -> bool:
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
