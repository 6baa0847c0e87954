"""Every process the soak starts ends with it, however the soak ends, ``kill -9`` included.

The soak (:mod:`benchmarks.soak`) cleans up after itself when it returns, raises or takes
SIGINT, SIGTERM or SIGHUP. Two things cover the exits where its own code never runs:

- :func:`die_with_parent`, the ``preexec_fn`` of its direct children (writers, relays,
  the consumer): Linux sends each SIGKILL the moment the soak dies (``PR_SET_PDEATHSIG``).
- the watchdog, this module, in a session of its own (a ``kill`` of the soak's process
  group does not reach it)::

      python -m benchmarks.soak_watchdog --mark MARK [--remove DIR ...] [--files DIR] < PIPE

  The soak holds the only write end of PIPE, so the watchdog reads end-of-file when the
  soak is gone, however it went. It then ends every process whose environment holds
  ``EVENTFERRY_SOAK_MARK=MARK`` (SIGTERM, then SIGKILL after :data:`GRACE` seconds) and
  removes the ``--remove`` directories (the private servers' data); ``--files``, the
  soak's records and logs, stays for the post-mortem and is named. The soak sets the
  mark before it starts anything, so every child and grandchild inherits it: the private
  servers in their sessions of their own (runuser, postgres and its backends,
  rabbitmq-server, beam.smp, erl_child_setup), rabbitmqctl calls, relays, writers.

After a clean exit of the soak, the watchdog finds nothing to end and exits at once.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARK_VARIABLE = "EVENTFERRY_SOAK_MARK"
#: Seconds between SIGTERM and SIGKILL for what the soak left behind.
GRACE = 5.0
PR_SET_PDEATHSIG = 1
#: Not ours to end even when our RabbitMQ started it: Erlang's port mapper is one per
#: host, and other nodes (the shared RabbitMQ) may have registered with it since.
SHARED = {"epmd"}


def new_mark() -> str:
    return f"{os.getpid()}-{secrets.token_hex(6)}"


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` after which the child gets SIGKILL when this process dies (Linux;
    ``None`` elsewhere). Only for children this (single-threaded) process starts itself:
    the signal follows the thread that forked, and is cleared for a set-user-ID program
    or a change of user (runuser), so the servers rely on the watchdog instead."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    parent = os.getpid()

    def preexec() -> None:
        prctl(ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL))
        if os.getppid() != parent:  # the parent died before the prctl took hold
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def start(mark: str, remove: list[Path], files: Path) -> int:
    """Start the watchdog for the processes carrying ``mark``; returns the pipe's write
    end, which the caller keeps open (and never hands to a child) until it exits."""
    read_end, write_end = os.pipe()  # neither end is inherited unless passed
    env = {k: v for k, v in os.environ.items() if k != MARK_VARIABLE}
    subprocess.Popen(
        [sys.executable, "-m", "benchmarks.soak_watchdog", "--mark", mark, "--files",
         str(files), *(arg for path in remove for arg in ("--remove", str(path)))],
        stdin=read_end, stdout=subprocess.DEVNULL, cwd=ROOT, env=env,
        start_new_session=True)
    os.close(read_end)
    return write_end


def marked(mark: str) -> dict[int, str]:
    """The live processes whose environment holds the mark: pid -> name."""
    needle = f"{MARK_VARIABLE}={mark}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:  # a zombie's environ reads empty; a process may end while we look
            environ = (entry / "environ").read_bytes()
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if needle in environ.split(b"\0") and name not in SHARED:
            found[int(entry.name)] = name
    return found


def signal_all(pids: dict[int, str], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def end_marked(mark: str, grace: float = GRACE) -> dict[int, str]:
    """SIGTERM every marked process, SIGKILL what is left after ``grace`` seconds, until
    none is left (a dying server may still fork); returns those found at first."""
    first = marked(mark)
    if not first:
        return first
    signal_all(first, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while (left := marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    for _ in range(50):
        if not left:
            break
        signal_all(left, signal.SIGKILL)
        time.sleep(0.2)
        left = marked(mark)
    return first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mark", required=True)
    parser.add_argument("--remove", type=Path, action="append", default=[],
                        help="a directory to remove once the processes are ended")
    parser.add_argument("--files", type=Path, help="the soak's records and logs, kept")
    args = parser.parse_args()
    for signum in (signal.SIGINT, signal.SIGHUP):  # only the soak's end ends us
        signal.signal(signum, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):  # nothing is ever written: this waits for EOF
        pass
    ended = end_marked(args.mark)
    for path in args.remove:
        shutil.rmtree(path, ignore_errors=True)
    if ended:
        names = ", ".join(sorted(set(ended.values())))
        kept = f"; records and logs kept in {args.files}" if args.files else ""
        print(f"soak watchdog: the soak is gone; ended the {len(ended)} processes it left "
              f"({names}){kept}", file=sys.stderr)


if __name__ == "__main__":
    main()
