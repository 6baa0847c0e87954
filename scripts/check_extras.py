"""Build the release artefacts, then install the wheel with each user-facing extra into
a clean virtualenv and run ``manage.py check`` there.

The test suite cannot see an extra that lacks a dependency: the ``dev`` extra brings
them all. Nor can it see a file the wheel leaves out: it runs from the working tree. So
this script builds the sdist and, from the sdist, the wheel (``python -m build``, as a
release does), checks both with ``twine check``, and installs that wheel, without
``dev``, into a virtualenv of its own per extra (each extra's on top of the checked bare
install's, so only what the extra adds is installed), where ``manage.py check`` runs in a small
project (``scripts/extras_probe``) with a publisher or database that needs the extra. The
bare install also migrates that project's fresh SQLite database, publishes an event and
relays it in one pass (``probe_relay_pass``), as a new user's first steps would.

    .venv/bin/python scripts/check_extras.py            # every extra
    .venv/bin/python scripts/check_extras.py kombu      # some

One resolution against the package index per run collects the wheels every extra
needs, downloading only what the wheelhouse (``$EVENTFERRY_WHEELHOUSE``, default
``~/.cache/eventferry-django/wheels``) lacks and building an sdist (mysqlclient) only
once; every virtualenv then installs from that set offline.

``mysql`` is skipped, with the reason, where MariaDB's or MySQL's client headers are
missing, and ``mssql`` where unixODBC is (``make test`` installs Debian's when run as
root). ``spark`` is not checked:
unpacking pyspark's 450 MB into a fresh virtualenv costs more than all the others.
"""

from __future__ import annotations

import ctypes.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "scripts" / "extras_probe"
WHEELHOUSE = Path(os.environ.get("EVENTFERRY_WHEELHOUSE")
                  or Path.home() / ".cache" / "eventferry-django" / "wheels")
#: The ``manage.py`` commands each extra is checked with, in order (see
#: probe_settings.py); "" is the bare install.
EXTRAS: dict[str, list[list[str]]] = {
    "": [["check"], ["probe_relay_pass"]],
    "kombu": [["check"]],
    "celery": [["check"]],
    "tasks": [["check"]],
    "nats": [["check"]],
    "kafka": [["check"]],
    "postgresql": [["check", "--database", "default"]],
    "mysql": [["check", "--database", "default"]],
    "mssql": [["check"]],
    "prometheus": [["check"]],
    "opentelemetry": [["check"]],
    "jsonschema": [["check"]],
}


def pip(*args: str, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "--disable-pip-version-check",
         *args], capture_output=True, text=True, check=False,
    )


def mysql_headers() -> bool:
    """Whether mysqlclient can find client headers to build against."""
    return any(
        subprocess.run(["pkg-config", "--exists", name], check=False).returncode == 0
        for name in ("mysqlclient", "mariadb", "libmariadb")
    ) if shutil.which("pkg-config") else False


def odbc_library() -> bool:
    """Whether pyodbc will find unixODBC's driver manager to load."""
    return ctypes.util.find_library("odbc") is not None


def build_distributions(into: Path) -> Path:
    """The sdist and, built from it, the wheel of this tree (``python -m build``), both
    passed by ``twine check``; returns the wheel. Exits with the tool's output if either
    step fails."""
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(into), str(ROOT)],
                           capture_output=True, text=True, check=False)
    if built.returncode != 0:
        raise SystemExit(f"extras: python -m build failed:\n{built.stdout}{built.stderr}")
    distributions = sorted(into.glob("eventferry_django-*"))
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict",
                              *map(str, distributions)],
                             capture_output=True, text=True, check=False)
    if checked.returncode != 0:
        raise SystemExit(f"extras: twine check failed:\n{checked.stdout}{checked.stderr}")
    [wheel] = into.glob("eventferry_django-*.whl")
    return wheel


def collect_wheels(wheel: Path, extras: list[str], into: Path) -> bool:
    """Resolve ``wheel`` with ``extras`` against the index and put every wheel it needs
    into ``into``. The wheelhouse keeps a copy of each for the next run, so only new
    releases are downloaded and an sdist (mysqlclient) is built once. False when the
    index cannot be reached."""
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    named = ",".join(e for e in extras if e)
    result = pip("wheel", "--quiet", "--wheel-dir", str(into), "--find-links",
                 str(WHEELHOUSE), f"{wheel}[{named}]" if named else str(wheel))
    if result.returncode != 0:
        print(f"extras: cannot reach the index, using the wheelhouse as it is:\n"
              f"{result.stderr.strip()}", flush=True)
        return False
    for dependency in into.glob("*.whl"):
        kept = WHEELHOUSE / dependency.name
        if not dependency.name.startswith("eventferry_django-") and not kept.exists():
            # Copied, then renamed: another run reading the wheelhouse never sees half.
            partial = WHEELHOUSE / f".{dependency.name}.{os.getpid()}"
            shutil.copyfile(dependency, partial)
            partial.replace(kept)
    return True


def site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def check(extra: str, wheel: Path, wheels: Path, workdir: Path,
          bare: Path | None = None) -> tuple[bool, str]:
    """Install ``wheel`` with ``extra`` from ``wheels`` alone into a new virtualenv and
    run its commands there, stopping at the first that fails. With ``bare`` (the checked
    bare install's virtualenv), the new one sees its packages behind its own, as an
    install on top of it: pip then adds only what the extra brings, which is what the
    check is about, and skips unpacking Django again for each extra."""
    venv = workdir / f"venv-{extra or 'bare'}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    if bare is not None:
        # A .pth line is appended to sys.path: this venv's own packages come first.
        (site_packages(venv) / "bare-install.pth").write_text(f"{site_packages(bare)}\n")
    # No .pyc files: compiling Django's every module is most of an install's CPU.
    installed = pip("install", "--quiet", "--no-compile", "--no-index", "--find-links",
                    str(wheels), f"{wheel}[{extra}]" if extra else str(wheel), python=python)
    if installed.returncode != 0:
        return False, f"pip install failed:\n{installed.stderr.strip()}"
    env = {**os.environ, "PYTHONPATH": str(PROBE), "DJANGO_SETTINGS_MODULE": "probe_settings",
           "PROBE_EXTRA": extra, "PROBE_SQLITE": str(workdir / "probe.sqlite3")}
    env.pop("EVENTFERRY_TEST_SETTINGS", None)
    output = []
    for command in EXTRAS[extra]:
        ran = subprocess.run([python, "-m", "django", *command], cwd=workdir, env=env,
                             capture_output=True, text=True, check=False)
        output.append(f"$ manage.py {' '.join(command)}\n{ran.stdout}{ran.stderr}".strip())
        if ran.returncode != 0:
            return False, "\n".join(output)
    return True, "\n".join(output)


def main(names: list[str]) -> int:
    unknown = set(names) - set(EXTRAS)
    if unknown:
        print(f"unknown extras: {', '.join(sorted(unknown))}; known: "
              f"{', '.join(e for e in EXTRAS if e)}", file=sys.stderr)
        return 2
    extras = names or list(EXTRAS)
    skipped = {}
    if "mysql" in extras and not mysql_headers():
        skipped["mysql"] = ("no MariaDB/MySQL client headers to build mysqlclient against "
                            "(Debian: apt-get install libmariadb-dev pkg-config)")
    if "mssql" in extras and not odbc_library():
        skipped["mssql"] = ("no unixODBC (libodbc.so.2) for pyodbc to load "
                            "(Debian: apt-get install unixodbc)")
    extras = [e for e in extras if e not in skipped]

    started = time.monotonic()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="eventferry-extras-") as tmp:
        wheel = build_distributions(Path(tmp) / "dist")
        print(f"extras: {wheel.name} and its sdist built and checked by twine "
              f"({time.monotonic() - started:.1f}s)", flush=True)
        wheels = Path(tmp) / "wheels"
        if not collect_wheels(wheel, extras, wheels):
            # Offline, or with the index down, what the wheelhouse holds may still do.
            wheels = WHEELHOUSE
        print(f"extras: dependencies from {wheels} ({time.monotonic() - started:.1f}s)",
              flush=True)
        bare: Path | None = None
        for extra in extras:
            began = time.monotonic()
            ok, output = check(extra, wheel, wheels, Path(tmp), bare)
            if ok and not extra:
                bare = Path(tmp) / "venv-bare"
            label = f"[{extra}]" if extra else "(no extra)"
            print(f"extras: {label:<16} {'ok' if ok else 'FAILED'} "
                  f"({time.monotonic() - began:.1f}s)", flush=True)
            if not ok:
                failed += 1
                print("    " + output.replace("\n", "\n    "), flush=True)
    for extra, reason in skipped.items():
        print(f"extras: [{extra}] skipped: {reason}")
    print(f"extras: {len(extras) - failed} passed, {failed} failed, {len(skipped)} skipped "
          f"in {time.monotonic() - started:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
