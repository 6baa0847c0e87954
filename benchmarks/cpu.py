"""CPU time of the machine and of a process tree, from ``/proc``: what a benchmark reports
per event."""

from __future__ import annotations

import os
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def machine_ticks() -> tuple[int, int]:
    """The machine's busy and total CPU time so far, in clock ticks (``/proc/stat``)."""
    with open("/proc/stat") as stat:
        ticks = [int(n) for n in stat.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle and iowait
    return sum(ticks) - idle, sum(ticks)


def process_ticks(root: int) -> int:
    """CPU ticks used so far by process ``root`` (all its threads) and its children,
    those that exited included (a database server's postmaster and its backends, which
    come and go: autovacuum workers, say)."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if pid == root:  # utime, stime, and its children's that it has waited for
            total += sum(int(fields[n]) for n in (11, 12, 13, 14))
        elif ppid == root:
            total += int(fields[11]) + int(fields[12])
    return total
