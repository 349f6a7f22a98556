"""``manage.py push``: publish a book's sources to a bookchat server. The command itself is ``bookchat.push``, which
``manage.py`` runs before loading Django (no settings, no database); this module lists it in ``manage.py help`` and
lets ``call_command("push", …)`` run it."""

from __future__ import annotations

import argparse
import sys

from django.core.management.base import BaseCommand

from bookchat import push


class Command(BaseCommand):
    help = push.DESCRIPTION
    requires_system_checks = []

    def add_arguments(self, parser) -> None:
        push.add_arguments(parser)

    def handle(self, *args, **options) -> None:
        names = ("root", "server", "book", "dry_run", "allow_errors", "revision", "busy_wait", "json", "language")
        code = push.run(argparse.Namespace(**{name: options[name] for name in names}), stdout=self.stdout,
                        stderr=self.stderr)
        if code:
            sys.exit(code)
