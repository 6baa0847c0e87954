"""A Spark standalone cluster on loopback, from pyspark's own scripts and jars: one master
and one small worker, each a real JVM process, stopped (and their process groups with
them) when the block ends.

The master's JSON page (``/json/``) says which applications ran and on what; the
worker's work directory holds each executor's files, among them the jars it fetched.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass(frozen=True)
class StandaloneCluster:
    master_url: str
    web_url: str
    work_dir: Path

    def state(self) -> dict[str, Any]:
        """The master's view: workers, active and completed applications."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=10) as response:
            return json.loads(response.read())  # type: ignore[no-any-return]

    def executor_dirs(self) -> list[Path]:
        """One directory per executor the worker started: app-.../<executor id>."""
        return sorted(p for p in self.work_dir.glob("app-*/*") if p.is_dir())


def cluster_env() -> dict[str, str]:
    """What the cluster's processes and the drivers that use it share: loopback only,
    small daemons, and the executors' Python the same as the tests'."""
    env = dict(os.environ)
    env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1",
               SPARK_DAEMON_MEMORY="256m", PYSPARK_PYTHON=sys.executable,
               SPARK_NO_DAEMONIZE="1")
    return env


def _start(log: Path, *args: str) -> subprocess.Popen[bytes]:
    # A process group of its own: spark-class execs java, and stopping the group
    # stops whatever the script started.
    return subprocess.Popen(
        [str(spark_home() / "bin" / "spark-class"), *args], env=cluster_env(),
        stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True,
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def standalone_cluster(directory: Path, *, cores: int = 1,
                       memory: str = "1g", timeout: float = 120.0) -> Iterator[StandaloneCluster]:
    """A master and one worker of ``cores`` cores and ``memory``, ready to take
    applications; their logs are in ``directory``."""
    work_dir = directory / "work"
    work_dir.mkdir(parents=True)
    master_log = directory / "master.log"
    processes = [_start(master_log, "org.apache.spark.deploy.master.Master",
                        "--host", "127.0.0.1", "--port", str(free_port()),
                        "--webui-port", str(free_port()))]
    try:
        cluster = _bound_master(master_log, processes[0], work_dir, timeout)
        processes.append(_start(
            directory / "worker.log", "org.apache.spark.deploy.worker.Worker",
            cluster.master_url, "--host", "127.0.0.1", "--cores", str(cores),
            "--memory", memory, "--webui-port", str(free_port()),
            "--work-dir", str(work_dir),
        ))
        _wait_for_worker(cluster, processes, directory, timeout)
        yield cluster
    finally:
        for process in reversed(processes):
            _stop(process)


#: What the master logs once its RPC endpoint and its web UI listen, with their ports.
MASTER_BOUND = re.compile(r"started service 'sparkMaster' on port (\d+)\..*?"
                          r"Bound MasterWebUI to [^,]+, and started at http://[^:/]+:(\d+)",
                          re.DOTALL)


def _bound_master(log: Path, master: subprocess.Popen[bytes], work_dir: Path,
                  timeout: float) -> StandaloneCluster:
    """The cluster at the ports the master logs it bound: a port chosen free may be taken
    before the master binds it (another leg's cluster picked it too), and Spark then binds
    the next one; the one asked for may serve someone else's page."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and master.poll() is None:
        bound = MASTER_BOUND.search(log.read_text(errors="replace"))
        if bound:
            port, web_port = bound.groups()
            return StandaloneCluster(f"spark://127.0.0.1:{port}",
                                     f"http://127.0.0.1:{web_port}", work_dir)
        time.sleep(0.2)
    raise AssertionError(f"the Spark master did not bind in {timeout:.0f} s:\n"
                         f"{log.read_text(errors='replace')[-2000:]}")


def _wait_for_worker(cluster: StandaloneCluster, processes: list[subprocess.Popen[bytes]],
                     directory: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            break
        try:
            workers = cluster.state().get("workers", [])
        except OSError:
            workers = []
        if any(w.get("state") == "ALIVE" for w in workers):
            return
        time.sleep(0.5)
    logs = "\n".join(p.read_text()[-2000:] for p in sorted(directory.glob("*.log")))
    raise AssertionError(f"the standalone cluster did not come up in {timeout:.0f} s:\n{logs}")
