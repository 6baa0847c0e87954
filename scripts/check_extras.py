"""Install each user-facing extra into a clean virtualenv and run ``manage.py check``.

The test suite cannot see an extra that lacks a dependency: the ``dev`` extra brings
them all. So each extra is installed here from this working tree, without ``dev``, into
a virtualenv of its own, and ``manage.py check`` runs there in a small project
(``scripts/extras_probe``) with a publisher or database that needs the extra.

    .venv/bin/python scripts/check_extras.py            # every extra
    .venv/bin/python scripts/check_extras.py kombu      # some

One resolution against the package index per run downloads only what is new into a
wheelhouse (``$EVENTFERRY_WHEELHOUSE``, default ``~/.cache/eventferry-django/wheels``);
every virtualenv then installs from it offline. pip's own cache keeps the wheels it
builds (mysqlclient). ``mysql`` is skipped, with the reason, where MariaDB's or MySQL's
client headers are missing (``make test`` installs Debian's when run as root).
``spark`` is not checked: pyspark is a 300 MB download and nothing in eventferry
imports it yet.
"""

from __future__ import annotations

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
#: What each extra is checked with (see probe_settings.py); "" is the bare install.
EXTRAS: dict[str, list[str]] = {
    "": ["check"],
    "kombu": ["check"],
    "celery": ["check"],
    "postgresql": ["check", "--database", "default"],
    "mysql": ["check", "--database", "default"],
    "mssql": ["check"],
    "prometheus": ["check"],
    "opentelemetry": ["check"],
}
BUILD_REQUIREMENTS = ["setuptools>=64", "wheel"]


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


def fill_wheelhouse(extras: list[str], into: Path) -> Path | None:
    """Bring the wheelhouse up to date for ``extras`` and build this working tree into
    ``into``; the wheel, or None when the index cannot be reached."""
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    # `pip wheel`, not `pip download`: an sdist (mysqlclient) is built once, into the
    # wheelhouse, instead of in every virtualenv.
    named = ",".join(e for e in extras if e)
    result = pip("wheel", "--quiet", "--wheel-dir", str(WHEELHOUSE), "--find-links",
                 str(WHEELHOUSE), f"{ROOT}[{named}]" if named else str(ROOT),
                 *BUILD_REQUIREMENTS)
    ours = list(WHEELHOUSE.glob("eventferry_django-*.whl"))
    if result.returncode != 0:
        print(f"extras: could not refresh the wheelhouse, using it as it is:\n"
              f"{result.stderr.strip()}", flush=True)
        for stale in ours:
            stale.unlink()
        return None
    [wheel] = ours
    return Path(shutil.move(wheel, into / wheel.name))


def build_wheel(into: Path) -> Path:
    """This working tree as a wheel, from the wheelhouse alone."""
    built = pip("wheel", "--quiet", "--no-deps", "--no-index", "--find-links",
                str(WHEELHOUSE), "--wheel-dir", str(into), str(ROOT))
    if built.returncode != 0:
        raise SystemExit(f"extras: cannot build eventferry-django:\n{built.stderr}")
    [wheel] = into.glob("eventferry_django-*.whl")
    return wheel


def check(extra: str, wheel: Path, workdir: Path) -> tuple[bool, str]:
    """Install ``wheel`` with ``extra`` into a new virtualenv and run its check there."""
    venv = workdir / f"venv-{extra or 'bare'}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    installed = pip("install", "--quiet", "--no-index", "--find-links", str(WHEELHOUSE),
                    f"{wheel}[{extra}]" if extra else str(wheel), python=python)
    if installed.returncode != 0:
        return False, f"pip install failed:\n{installed.stderr.strip()}"
    env = {**os.environ, "PYTHONPATH": str(PROBE), "DJANGO_SETTINGS_MODULE": "probe_settings",
           "PROBE_EXTRA": extra, "PROBE_SQLITE": str(workdir / "probe.sqlite3")}
    env.pop("EVENTFERRY_TEST_SETTINGS", None)
    ran = subprocess.run([python, "-m", "django", *EXTRAS[extra]], cwd=workdir, env=env,
                         capture_output=True, text=True, check=False)
    output = (ran.stdout + ran.stderr).strip()
    return ran.returncode == 0, output


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
    extras = [e for e in extras if e not in skipped]

    started = time.monotonic()
    failed = 0
    with tempfile.TemporaryDirectory(prefix="eventferry-extras-") as tmp:
        # Offline, or with the index down, what the wheelhouse holds may still do.
        wheel = fill_wheelhouse(extras, Path(tmp)) or build_wheel(Path(tmp))
        print(f"extras: wheelhouse {WHEELHOUSE} ready, {wheel.name} built "
              f"({time.monotonic() - started:.1f}s)", flush=True)
        for extra in extras:
            began = time.monotonic()
            ok, output = check(extra, wheel, Path(tmp))
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
