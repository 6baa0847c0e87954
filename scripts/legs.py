"""Run the checks ``make test`` (and so CI) runs, the ones that share nothing side by side,
and end with a table of each one's wall time and test count.

    python3 scripts/legs.py                      # everything: make test, .ci/run
    python3 scripts/legs.py sqlite postgres      # some legs (make test-sqlite runs one)
    python3 scripts/legs.py --list               # the legs and what each runs

A *leg* is one pytest run of the suite on one database with one Python and Django, in
parallel within itself (pytest-xdist, a database per worker: tests/settings.py). Tests
marked ``serial`` say why they must run alone and run after the rest of their leg, one
at a time, at the machine's normal CPU priority while everything else runs below it.
Besides the legs there are lint, the docs build and the extras check.

The suite waits more than it computes (relays, workers and brokers started as real
processes), so more runs than cores go at once: ``--slots`` is how many pytest workers
and other jobs run together (default 8 on this 2-core machine: more only slows each
test down, and tests that wait for a relay or a browser start to time out). Each job's output goes
to ``build/legs/<job>.log``; a failed job's log is printed whole at the end.

Standard library only: it runs before any virtualenv exists.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "build" / "legs"
MAIN_VENV = ".venv"

#: What every ``make test`` leg of ``.venv`` runs on: the spark extra is installed there,
#: so a missing pyspark fails the Spark tests instead of skipping them.
REQUIRE_SPARK = {"EVENTFERRY_REQUIRE_SPARK": "1"}
NOT_SLOW = "not slow"
#: The tests that differ by Django version (the Python 3.13 + Django 6.0 leg).
DJANGO_SMOKE = ("tests/test_task_backend.py", "tests/test_task_results_migration.py",
                "tests/test_migration.py", "tests/test_admin.py", "tests/test_publish.py",
                "tests/test_json_text_field.py")
#: CI's SQL Server leg on the T-SQL endpoint: the files in tests/tds_ci.txt on pyodbc, and
#: those where the driver matters (binding, datetimes, error classes) on mssql-python too.
DRIVER_TESTS = ("tests/test_store.py", "tests/test_publish.py", "tests/test_scheduled.py",
                "tests/test_flush.py", "tests/test_utc_cutoffs.py",
                "tests/test_transient_errors.py", "tests/test_json_text_field.py")
#: The test files with a test marked ``serial``: its leg's serial phase runs only these.
SERIAL_FILES = tuple(sorted(
    str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("test_*.py")
    if "mark.serial(" in path.read_text(encoding="utf-8")))
DJANGO_LINES = {"django42": "Django>=4.2,<5.0", "django52": "Django>=5.2,<6.0",
                "django60": "Django>=6.0,<6.1"}


@dataclass(frozen=True)
class Run:
    """One pytest invocation of a leg: the files (empty: all) and a marker expression."""

    files: tuple[str, ...] = ()
    markers: str = ""

    def arguments(self, *, serial: bool, among: tuple[str, ...] = ()) -> list[str]:
        """pytest's arguments for the run's parallel part, or for its serial tests (then
        only the files ``among`` that hold some)."""
        phase = "serial" if serial else "not serial"
        expression = f"({self.markers}) and {phase}" if self.markers else phase
        files = self.files
        if serial:
            files = tuple(f for f in among if not self.files or f in self.files)
        return [*files, "-m", expression]

    def holds(self, files: tuple[str, ...]) -> bool:
        return not self.files or any(f in self.files for f in files)


@dataclass(frozen=True)
class Leg:
    """One database, one Python and Django line, one or more pytest runs."""

    name: str
    database: str
    runs: tuple[Run, ...] = (Run(),)
    #: ``py312-django60``: a virtualenv of its own with that Python and Django line and
    #: the dev extra; empty: ``.venv`` (Python 3.11, the newest Django, every extra).
    version: str = ""
    workers: int = 3
    env: dict[str, str] = field(default_factory=dict)

    @property
    def venv(self) -> str:
        return f".venv-{self.version}" if self.version else MAIN_VENV

    def describe(self) -> str:
        where = self.version or "py311, .venv's Django"
        runs = "; then ".join(" ".join(run.files) + (f" -m '{run.markers}'" if run.markers
                                                     else "") or "everything"
                              for run in self.runs)
        return f"{self.name:<28} {self.database:<9} {where:<22} {runs}"


def version_leg(version: str, database: str, *runs: Run, workers: int = 3) -> Leg:
    return Leg(f"{version}-{database}", database, runs or (Run(markers=NOT_SLOW),),
               version=version, workers=workers,
               env={"EVENTFERRY_ADMIN_SCREENSHOT": f".venv-{version}/admin-dead-events.png"})


#: Longest first, but for the two-worker legs that fit beside the first two, one after the
#: other (a leg that does not fit yet holds back those after it): the scheduler starts
#: them in this order.
LEGS: tuple[Leg, ...] = (
    Leg("postgres", "postgres", env=REQUIRE_SPARK, workers=3),
    Leg("mariadb", "mariadb", env=REQUIRE_SPARK, workers=3),
    Leg("tds-mssql-python", "mssql", (Run(files=DRIVER_TESTS),), workers=2,
        env={"EVENTFERRY_MSSQL_DRIVER": "mssql_python"}),
    Leg("tds-pyodbc", "mssql", (Run(files=tuple(
        (ROOT / "tests" / "tds_ci.txt").read_text().split())),), workers=2),
    Leg("sqlite", "sqlite", env=REQUIRE_SPARK, workers=3),
    version_leg("py312-django60", "postgres",
                Run(markers=NOT_SLOW), Run(files=("tests/test_task_workers.py",))),
    version_leg("py311-django42", "postgres", Run(markers=NOT_SLOW),
                Run(files=("tests/test_task_workers.py", "tests/test_demo.py"))),
    version_leg("py312-django60", "sqlite"),
    version_leg("py311-django42", "sqlite"),
    version_leg("py313-django52", "sqlite"),
    version_leg("py313-django60", "sqlite", Run(files=DJANGO_SMOKE), workers=2),
)


# -- jobs and their scheduling -----------------------------------------------------------


@dataclass
class Job:
    name: str
    commands: list[list[str]]
    slots: int = 1
    env: dict[str, str] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    #: Jobs that must have ended first, whatever their result.
    after: tuple[str, ...] = ()
    #: A leg's serial phase: one at a time, and the only job at the normal CPU priority
    #: (every other runs under ``nice``), so no load of the other legs starves the relays
    #: its tests time. Two serial phases side by side at one priority starved each
    #: other's relays: a joining relay's first publish came 30 s late. It takes no slot:
    #: the slots share what CPU it leaves.
    serial: bool = False
    #: pytest's exit 5 (no test selected) is no failure: a leg may have no serial test.
    empty_ok: bool = False
    status: str = "waiting"
    started: float = 0.0
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    note: str = ""

    @property
    def log(self) -> Path:
        return LOGS / f"{self.name}.log"


SUMMARY = re.compile(r"^(?:=+ )?((?:\d+ \w+(?:, )?)+) in [\d.]+s")
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)")


def pytest_counts(text: str) -> dict[str, int]:
    """The outcome counts of every pytest run in a log, added up."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        match = SUMMARY.match(line.strip())
        if not match:
            continue
        for number, outcome in COUNT.findall(match.group(1)):
            outcome = "errors" if outcome.startswith("error") else outcome
            counts[outcome] = counts.get(outcome, 0) + int(number)
    return counts


#: The ``nice`` of every job but the serial phases: the kernel then gives a serial
#: phase's processes about nine times the CPU share of any other job's.
BACKGROUND_NICE = 10


def run_job(job: Job) -> None:
    env = {**os.environ, **job.env}
    job.started = time.monotonic()
    job.status = "running"
    with job.log.open("w") as log:
        for command in job.commands:
            log.write(f"$ {shlex.join(command)}\n")
            log.flush()
            if not job.serial:
                command = ["nice", "-n", str(BACKGROUND_NICE), *command]
            code = subprocess.call(command, cwd=ROOT, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            if code != 0 and not (code == 5 and job.empty_ok):
                job.status = "failed"
                job.note = f"exit {code}: {shlex.join(command)}"
                break
        else:
            job.status = "passed"
    job.seconds = time.monotonic() - job.started
    job.counts = pytest_counts(job.log.read_text(errors="replace"))


def schedule(jobs: list[Job], slots: int) -> None:
    """Start jobs in order as their needs pass and slots free up (in order: a ready job
    waits for the slots it needs before any after it starts; serial phases, first in
    ``jobs``, wait only for each other); a job whose need failed is not run."""
    lock = threading.Condition()
    threads: list[threading.Thread] = []

    def body(job: Job) -> None:
        run_job(job)
        with lock:
            counts = ", ".join(f"{n} {k}" for k, n in job.counts.items())
            print(f"[{clock()}] {job.status:<6} {job.name} ({job.seconds:.0f} s"
                  f"{'; ' + counts if counts else ''})", flush=True)
            lock.notify_all()

    def free() -> int:
        return slots - sum(j.slots for j in jobs if j.status == "running")

    with lock:
        while any(j.status in ("waiting", "running") for j in jobs):
            for job in jobs:
                if job.status != "waiting":
                    continue
                needs = [j for j in jobs if j.name in job.needs]
                if any(j.status in ("failed", "not run") for j in needs):
                    job.status, job.note = "not run", "a job it needs failed"
                    continue
                if any(j.status != "passed" for j in needs) or any(
                        j.status in ("waiting", "running") for j in jobs if j.name in job.after):
                    continue
                if job.serial:
                    if any(j.serial and j.status == "running" for j in jobs):
                        continue
                # A job bigger than the machine still runs, alone. One that is ready but
                # does not fit yet keeps later ones from starting: small jobs filling each
                # freed slot would start a long leg last.
                elif not (job.slots <= free() or free() == slots):
                    break
                job.status = "running"
                print(f"[{clock()}] start  {job.name}", flush=True)
                thread = threading.Thread(target=body, args=(job,))
                threads.append(thread)
                thread.start()
            lock.wait(timeout=5)
    for thread in threads:
        thread.join()


START = time.monotonic()


def clock() -> str:
    elapsed = int(time.monotonic() - START)
    return f"{elapsed // 60:02d}:{elapsed % 60:02d}"


# -- what runs ---------------------------------------------------------------------------


def find_python(version: str) -> str | None:
    """``py312`` -> a python3.12 that runs, from PATH or pyenv's versions."""
    name = "python" + version.removeprefix("py").replace("3", "3.", 1)
    candidates = [os.path.join(d, name) for d in os.environ.get("PATH", "").split(":")]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(str(p) for p in pyenv.glob(f"*/bin/{name}"))
    for candidate in candidates:
        if os.access(candidate, os.X_OK) and subprocess.call(
                [candidate, "-c", ""], stderr=subprocess.DEVNULL) == 0:
            return candidate
    return None


def venv_job(version: str) -> Job | None:
    """The virtualenv of a version leg, made anew when pyproject.toml is newer."""
    python_version, django = version.split("-")
    python = find_python(python_version)
    if python is None:
        return None
    venv = ROOT / f".venv-{version}"
    marker = venv / ".installed"
    if marker.exists() and marker.stat().st_mtime >= (ROOT / "pyproject.toml").stat().st_mtime:
        return Job(f"venv-{version}", [["true"]])
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile"]
    return Job(f"venv-{version}", [
        ["rm", "-rf", str(venv)], [python, "-m", "venv", str(venv)],
        [*pip, "-e", ".[dev]", DJANGO_LINES[django]], ["touch", str(marker)]])


def leg_jobs(leg: Leg, mssql_url: str | None) -> list[Job]:
    """The leg's tests in parallel, then its ``serial`` tests one at a time, while no other
    leg's serial tests run and the rest of the machine's jobs yield the CPU to them."""
    python = str(ROOT / leg.venv / "bin" / "python")
    env = {**leg.env, "EVENTFERRY_TEST_DB": leg.database}
    if mssql_url:
        # SQL Server's test databases are kept (one per worker): each leg has its own, so
        # the two drivers' legs can run side by side.
        env.update(EVENTFERRY_MSSQL_URL=mssql_url,
                   EVENTFERRY_MSSQL_TEST_NAME=f"eventferry_test_{leg.name.replace('-', '_')}")
    pytest = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=15"]
    about = [python, "-c", ("import sys, django; print('Python', sys.version.split()[0] + "
                            f"', Django', django.get_version() + ', {leg.database}')")]
    needs = (f"venv-{leg.version}",) if leg.version else ()
    parallel = Job(leg.name, [about] + [
        [*pytest, "-n", str(leg.workers), "--dist", "loadgroup", *run.arguments(serial=False)]
        for run in leg.runs],
        slots=leg.workers, env=env, needs=needs)
    serial = [Job(f"{leg.name}-serial", [
        [*pytest, *run.arguments(serial=True, among=SERIAL_FILES)] for run in leg.runs
        if run.holds(SERIAL_FILES)], slots=0, env=env, needs=needs, after=(leg.name,),
        serial=True, empty_ok=True)]
    return [parallel, *(job for job in serial if job.commands)]


def prepare(legs: Sequence[Leg], *, checks: bool) -> str | None:
    """What every job needs before any starts: .venv, the services, Chromium, PgBouncer,
    the Spark jars and class archive, and (for the SQL Server legs) the mssql extra and
    the T-SQL endpoint, one after the other (apt and pip do not share). Returns the
    EVENTFERRY_MSSQL_URL, or None."""
    targets = [f"{MAIN_VENV}/.installed", "services", "browsers", "pgbouncer", "spark",
               f"{MAIN_VENV}/spark-classes.jsa"]
    if checks:
        targets.append("extras-libraries")
    subprocess.run(["make", "-s", *targets], cwd=ROOT, check=True)
    if not any(leg.database == "mssql" for leg in legs):
        return None
    subprocess.run([f"{MAIN_VENV}/bin/python", "-m", "pip", "install", "--quiet", "-e",
                    ".[mssql]"], cwd=ROOT, check=True)
    found = subprocess.run(["scripts/ensure-tds-endpoint.sh"], cwd=ROOT,
                           stdout=subprocess.PIPE, text=True)
    if found.returncode == 3:
        print("legs: no ../shared/tds-engine/setup and no EVENTFERRY_MSSQL_URL: "
              "the SQL Server legs not run", flush=True)
        return None
    found.check_returncode()
    return found.stdout.strip()


def plan(legs: Sequence[Leg], mssql_url: str | None, *, checks: bool) -> list[Job]:
    bin_ = f"{MAIN_VENV}/bin"
    jobs: list[Job] = []
    if checks:
        jobs += [Job("lint", [[f"{bin_}/ruff", "check", "."], [f"{bin_}/mypy",
                                                                 "eventferry_django"]]),
                 Job("docs", [["make", "-s", "docs"]]),
                 Job("extras", [[f"{bin_}/python", "scripts/check_extras.py"]])]
    for version in dict.fromkeys(leg.version for leg in legs if leg.version):
        venv = venv_job(version)
        if venv is None:
            print(f"legs: no python for {version}: its legs not run", flush=True)
        else:
            jobs.append(venv)
    made = {job.name for job in jobs}
    for leg in legs:
        if leg.version and f"venv-{leg.version}" not in made:
            continue
        if leg.database == "mssql" and not mssql_url:
            continue
        jobs += leg_jobs(leg, mssql_url)
    # The serial phases (each ready only when its leg ends), the other legs' virtualenvs
    # (a few minutes, so those legs are ready when slots free up), then the longest first:
    # the legs of .venv, the short jobs, the other legs as listed.
    return sorted(jobs, key=lambda j: (not j.serial, bool(j.needs), j.name in {
        "lint", "docs", "extras"}))


def table(jobs: Sequence[Job]) -> str:
    lines = ["| job | result | wall time | passed | failed | skipped |",
             "|---|---|---:|---:|---:|---:|"]
    for job in jobs:
        minutes, seconds = divmod(round(job.seconds), 60)
        counts = job.counts
        tested = "errors" in counts or "passed" in counts or "failed" in counts
        lines.append(
            f"| {job.name} | {job.status} | {minutes}:{seconds:02d} | "
            + (f"{counts.get('passed', 0)} | {counts.get('failed', 0) + counts.get('errors', 0)}"
               f" | {counts.get('skipped', 0)} |" if tested else " |  |  |"))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("legs", nargs="*", help="legs to run (default: all, with the checks)")
    parser.add_argument("--list", action="store_true", help="list the legs and exit")
    parser.add_argument("--slots", type=int, default=int(os.environ.get("LEG_SLOTS", "8")),
                        help="pytest workers and jobs that run at once (LEG_SLOTS)")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(leg.describe() for leg in LEGS))
        return 0
    unknown = set(args.legs) - {leg.name for leg in LEGS}
    if unknown:
        parser.error(f"no leg {', '.join(sorted(unknown))}; --list shows them")
    legs = [leg for leg in LEGS if not args.legs or leg.name in args.legs]
    checks = not args.legs
    LOGS.mkdir(parents=True, exist_ok=True)
    mssql_url = prepare(legs, checks=checks)
    jobs = plan(legs, mssql_url, checks=checks)
    print(f"[{clock()}] {len(jobs)} jobs, {args.slots} slots; logs in "
          f"{LOGS.relative_to(ROOT)}/", flush=True)
    schedule(jobs, args.slots)

    failed = [job for job in jobs if job.status != "passed"]
    for job in failed:
        print(f"\n===== {job.name}: {job.status} {job.note} ({job.log.relative_to(ROOT)}) "
              "=====", flush=True)
        if job.log.exists():
            sys.stdout.write(job.log.read_text(errors="replace"))
    # In the order they started (a leg's serial phase after it), those not run last.
    print(f"\n{table(sorted(jobs, key=lambda j: (j.started == 0, j.started)))}\n")
    total = {k: sum(j.counts.get(k, 0) for j in jobs) for k in ("passed", "failed",
                                                                 "errors", "skipped")}
    wall = int(time.monotonic() - START)
    print(f"wall time {wall // 60}:{wall % 60:02d}")
    print(f"total: {total['passed']} passed, {total['failed'] + total['errors']} failed, "
          f"{total['skipped']} skipped", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
