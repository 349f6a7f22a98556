#!/usr/bin/env python
"""Django's command-line utility for bookchat."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bookchat.settings")
    from bookchat.deployment import run_management_command

    run_management_command(sys.argv)


if __name__ == "__main__":
    main()
