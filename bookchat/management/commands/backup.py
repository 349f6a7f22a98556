"""``manage.py backup OUT [--with-secrets] [--force] [--json]``: write the whole install to one archive
(``bookchat.backups``: the database, uploads, audit archives and, with ``--with-secrets``, the secret key).

Exit status: 0 written, 1 the backup failed (nothing is left at OUT), 2 refused (OUT exists without ``--force``,
its folder is missing).
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from bookchat.backups import create_backup
from bookchat.base.errors import DATABASE_ERRORS, BookchatError, exit_command


class Command(BaseCommand):
    help = "Back up the database, uploads and audit archives (and with --with-secrets the secret key) to one file."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("out", metavar="OUT", help="The archive to write, e.g. bookchat-2026-12-01.tar.gz.")
        parser.add_argument("--with-secrets", action="store_true",
                            help="Include the secret key: the archive must then be kept as secret as the key.")
        parser.add_argument("--force", action="store_true", help="Replace OUT when it exists.")
        parser.add_argument("--json", action="store_true", help="Print a summary as one JSON object.")

    def handle(self, *args, **options) -> None:
        try:
            report = create_backup(Path(options["out"]), force=options["force"], with_secrets=options["with_secrets"])
        except (BookchatError, *DATABASE_ERRORS) as exc:
            exit_command(self, exc, as_json=options["json"])
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict()))
            return
        inc, db = report.includes, report.database
        self.stdout.write(
            f"Wrote {report.archive} ({report.bytes / 1e6:.1f} MB) in {report.seconds:.1f} s:\n"
            f"  the database {db['name']} ({db['source']}, PostgreSQL {db['server_version']}), one snapshot\n"
            f"  {inc['uploads']} upload file(s), {inc['archive']} audit archive(s)\n"
            + ("  the secret key: keep this archive as secret as the key itself\n" if inc["secret_key"] else
               "  no secret key (add --with-secrets to include it)\n")
            + f"bookchat {report.bookchat_version}; restore it with: manage.py restore {report.archive}")
