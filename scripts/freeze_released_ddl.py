"""Freeze a release's DDL: render it from today's live code for the sentinel names and
write ``eventferry_django/released_sql/<release>/<table>.<vendor>.sql`` for every table
the release concerns and every vendor (and a ``.native_json`` file where NATIVE_JSON
changes it).

    .venv/bin/python scripts/freeze_released_ddl.py 0.2.0

The release must be listed in ``eventferry_django.ddl.RELEASES``. A file that exists is
never rewritten: released DDL is frozen, and a change is a new release. Without
arguments, every release is checked and only missing files are written.
"""

from __future__ import annotations

import sys
from pathlib import Path

import django
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(releases: list[str], directory: Path = ROOT / "eventferry_django" / "released_sql"
         ) -> int:
    if not settings.configured:
        settings.configure(INSTALLED_APPS=["eventferry_django"])
        django.setup()
    from eventferry_django.ddl import RELEASES, freeze
    from eventferry_django.released_ddl import file_name, parse
    from eventferry_django.store import VENDORS

    unknown = sorted(set(releases) - set(RELEASES))
    if unknown:
        print(f"not in eventferry_django.ddl.RELEASES: {', '.join(unknown)}", file=sys.stderr)
        return 2
    for release in releases or list(RELEASES):
        (directory / release).mkdir(parents=True, exist_ok=True)
        for kind in RELEASES[release]:
            for vendor in VENDORS:
                default = freeze(release, kind, vendor)
                native = freeze(release, kind, vendor, native_json=True)
                files = {file_name(kind, vendor): default}
                if parse(native) != parse(default):
                    files[file_name(kind, vendor, native_json=True)] = native
                for name, text in files.items():
                    path = directory / release / name
                    if path.exists():
                        print(f"kept    {release}/{name} (released: never rewritten)")
                        continue
                    path.write_text(text, encoding="utf-8")
                    print(f"written {release}/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
