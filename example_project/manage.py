#!/usr/bin/env python
"""Django's command-line utility for the example shop."""

import os
import sys
from pathlib import Path


def main() -> None:
    # Lets a checkout run the example without installing eventferry-django; an installed
    # copy comes first on the path and wins.
    sys.path.append(str(Path(__file__).resolve().parent.parent))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
