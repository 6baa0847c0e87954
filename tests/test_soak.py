"""The soak (benchmarks/soak.py): at 50,000 events with a few faults, nothing lost, no
phantoms, no order violations, nothing dead, duplicates within their bound; and however
it ends (kill -9 included) it takes every process it started with it, private servers
and their grandchildren too.

Those start their own PostgreSQL and RabbitMQ (benchmarks/servers.py), so they run once,
in the PostgreSQL run of the suite; ``python benchmarks/soak.py`` is the full-size version.
The report's own rules need no server and run everywhere.
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.soak_report import Check, row, summary, table

from .settings import VENDOR

ROOT = Path(__file__).resolve().parent.parent

once = pytest.mark.skipif(VENDOR != "postgres", reason="runs once, in the PostgreSQL run")
servers = [pytest.mark.slow, once]


@pytest.mark.slow
@once
def test_soak_50000_events_through_kills_and_restarts() -> None:
    result = subprocess.run(
        [sys.executable, "benchmarks/soak.py", "--db", "postgres", "--events", "50000",
         "--faults", "0.1", "--max-per-transaction", "16"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    print(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "| lost " in result.stdout
    assert result.stdout.startswith("soak seed ")
    assert result.stdout.splitlines()[-1].startswith("passed: lost=0, phantoms=0")


# -- the verdict --------------------------------------------------------------------------
def test_a_failed_row_says_so_in_the_table_and_in_the_last_line() -> None:
    checks = [Check("lost", 3), Check("phantoms", 0), Check("duplicates", 900, 800),
              Check("order violations", 0), Check("dead", 2)]
    lines = table([row(check.name, str(check.value), "0", check) for check in checks]
                  + [row("throughput", "600 events/s")]).splitlines()

    verdicts = {line.split("|")[1].strip(): line.split("|")[4].strip() for line in lines[2:]}
    assert verdicts == {"lost": "FAILED", "phantoms": "ok", "duplicates": "FAILED",
                        "order violations": "ok", "dead": "FAILED", "throughput": ""}
    assert summary(checks, ["writer 2 exited with 1"]) == (
        "FAILED: lost=3, duplicates=900 (bound 800), dead=2, writer 2 exited with 1")


def test_a_passing_run_says_passed() -> None:
    checks = [Check("lost", 0), Check("duplicates", 12, 800)]
    assert summary(checks, []) == "passed: lost=0, duplicates=12 (bound 800)"
    assert summary(checks, ["relay pid 7 exited with 1"]).startswith("FAILED: relay pid 7")


# -- its processes die with it ------------------------------------------------------------
def stat(pid: int) -> tuple[int, int, str, str] | None:
    """(parent pid, start time, state, name) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[19]), fields[0], name


def descendants(root: int) -> dict[tuple[int, int], str]:
    """Every process below ``root``: (pid, start time) -> name."""
    processes = {int(p.name): stat(int(p.name)) for p in Path("/proc").iterdir()
                 if p.name.isdigit()}
    found: dict[tuple[int, int], str] = {}
    parents = {root}
    while parents:
        children = {pid: info for pid, info in processes.items() if info and info[0] in parents}
        found.update({(pid, info[1]): info[3] for pid, info in children.items()})
        parents = set(children)
    return found


def alive(process: tuple[int, int]) -> bool:
    """Still running (a zombie is done), and not a new process with a reused pid."""
    info = stat(process[0])
    return info is not None and info[1] == process[1] and info[2] != "Z"


def in_session(session: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2:].split()
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def read_until(process: subprocess.Popen[bytes], prefix: str, timeout: float) -> list[str]:
    """The process's output lines up to the one starting with ``prefix``."""
    assert process.stdout is not None
    lines, buffer = [], b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=1):
                continue
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                break
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            lines += [line.decode() for line in complete]
            if any(line.startswith(prefix) for line in lines):
                return lines
    raise AssertionError(f"no line starting with {prefix!r} in time:\n" + "\n".join(lines)
                         + buffer.decode())


@pytest.mark.parametrize(
    ("signum", "status"),
    [pytest.param(signal.SIGKILL, -signal.SIGKILL, marks=servers, id="SIGKILL"),
     pytest.param(signal.SIGTERM, 128 + signal.SIGTERM, marks=servers, id="SIGTERM")])
def test_the_soak_takes_its_processes_and_private_servers_with_it(
        signum: int, status: int) -> None:
    """Killed while it writes (a caller's timeout), the soak leaves no process behind:
    not its relays, writers and consumer, not its private PostgreSQL and RabbitMQ (in
    sessions of their own, with grandchildren), and their ports are closed."""
    driver = subprocess.Popen(
        [sys.executable, "benchmarks/soak.py", "--db", "postgres", "--events", "100000000",
         "--faults", "0", "--writers", "1", "--relays", "2", "--aggregates", "50"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True)  # so that its session can be looked for afterwards
    started: dict[tuple[int, int], str] = {}
    base = None
    try:
        lines = read_until(driver, "running:", timeout=240)
        assert lines[0].startswith("soak seed "), lines
        servers_line = next(line for line in lines if line.startswith("servers:"))
        ports = [int(port) for port in re.findall(r"127\.0\.0\.1:(\d+)", servers_line)]
        base = Path(servers_line.rsplit("files in ", 1)[1])
        assert all(listening(port) for port in ports)
        time.sleep(2)  # the writer writes, the relays relay
        started = descendants(driver.pid)
        names = set(started.values())
        print(f"the soak's processes before its {signal.Signals(signum).name}: "
              + ", ".join(f"{name} {pid}" for (pid, _), name in sorted(started.items())))
        # Grandchildren in sessions of their own: the ones a kill of the soak's group
        # or session misses.
        assert {"postgres", "beam.smp"} <= names, names

        driver.send_signal(signum)
        assert driver.wait(120) == status
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
                any(alive(p) for p in started) or in_session(driver.pid)
                or any(listening(port) for port in ports)):
            time.sleep(0.5)
        left = {pid: name for (pid, start), name in started.items() if alive((pid, start))}
        assert not left, f"still running 60 s after the soak's {signal.Signals(signum).name}"
        assert not in_session(driver.pid)
        assert not any(listening(port) for port in ports), ports
        deadline = time.monotonic() + 10  # the watchdog removes them after the processes
        while time.monotonic() < deadline and (base / "database").exists():
            time.sleep(0.2)
        assert not (base / "database").exists() and not (base / "rabbitmq").exists()
        assert driver.stdout is not None
        print("\n".join(lines) + "\n" + driver.stdout.read().decode(errors="replace"))
    finally:
        if driver.poll() is None:
            driver.kill()
        for pid, start in started:  # a failed test must not leave them running either
            if alive((pid, start)):
                os.kill(pid, signal.SIGKILL)
        if base is not None:  # the logs, kept as after any failed run
            shutil.rmtree(base, ignore_errors=True)
