#!/usr/bin/env python
"""Django's command-line utility for bookchat."""

import os
import sys


def main() -> None:
    if sys.argv[1:2] == ["push"]:  # a client of a server: no settings, no database (bookchat/push.py)
        from bookchat.push import main as push

        sys.exit(push(sys.argv[2:]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bookchat.settings")
    from bookchat.base.deployment import run_management_command

    run_management_command(sys.argv)


if __name__ == "__main__":
    main()
