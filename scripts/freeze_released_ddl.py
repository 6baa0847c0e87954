"""Freeze a migration's DDL when it is released: render it from today's live code for
the sentinel names and write ``eventferry_django/released_sql/<migration>.<vendor>.sql``
for every vendor (and a ``.native_json`` file where NATIVE_JSON changes it).

    .venv/bin/python scripts/freeze_released_ddl.py 0008_schema_version

The migration must be listed in ``eventferry_django.ddl.RELEASES``. A file that exists
is never rewritten: released DDL is frozen, and a change is a new migration. Without
arguments, every release is checked and only missing files are written.
"""

from __future__ import annotations

import sys
from pathlib import Path

import django
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(migrations: list[str]) -> int:
    settings.configure(INSTALLED_APPS=["eventferry_django"])
    django.setup()
    from eventferry_django.ddl import RELEASES, freeze
    from eventferry_django.released_ddl import file_name, parse
    from eventferry_django.store import VENDORS

    unknown = sorted(set(migrations) - set(RELEASES))
    if unknown:
        print(f"not in eventferry_django.ddl.RELEASES: {', '.join(unknown)}", file=sys.stderr)
        return 2
    directory = ROOT / "eventferry_django" / "released_sql"
    directory.mkdir(exist_ok=True)
    for migration in migrations or list(RELEASES):
        for vendor in VENDORS:
            default = freeze(migration, vendor)
            native = freeze(migration, vendor, native_json=True)
            files = {file_name(migration, vendor): default}
            if parse(native) != parse(default):
                files[file_name(migration, vendor, native_json=True)] = native
            for name, text in files.items():
                path = directory / name
                if path.exists():
                    print(f"kept    {path.relative_to(ROOT)} (released: never rewritten)")
                    continue
                path.write_text(text, encoding="utf-8")
                print(f"written {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
