"""``manage.py push``: publish a book's sources to a bookchat server. The command itself is ``bookchat.push``, which
``manage.py`` runs before loading Django (no settings, no database); this module lists it in ``manage.py help`` and
lets ``call_command("push", …)`` run it."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand

from bookchat.push import main, parser


class Command(BaseCommand):
    help = parser().description
    requires_system_checks = []

    def run_from_argv(self, argv: list[str]) -> None:
        sys.exit(main(argv[2:]))

    def add_arguments(self, parser) -> None:
        parser.add_argument("args", nargs="*")

    def handle(self, *args, **options) -> None:
        code = main(list(args), stdout=self.stdout, stderr=self.stderr)
        if code:
            sys.exit(code)
