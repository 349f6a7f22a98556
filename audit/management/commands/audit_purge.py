"""``manage.py audit_purge [--dry-run] [--days N] [--json]``: archive and delete old audit records.

Exit status: 0 done (or nothing to do), 1 the archive could not be written (nothing deleted),
2 bad options.
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandParser

from audit.retention import purge_old_records
from bookchat.base.errors import BookchatError


class Command(BaseCommand):
    help = "Archive audit records older than the retention period to var/archive/ (gzip JSONL) and delete them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="Only report how many records would go.")
        parser.add_argument("--days", type=int, help="Retention in days (default BOOKCHAT_AUDIT_RETENTION_DAYS).")
        parser.add_argument("--json", action="store_true", help="Print the report as one JSON object.")

    def handle(self, *args, **options) -> None:
        try:
            report = purge_old_records(days=options["days"], dry_run=options["dry_run"])
        except BookchatError as exc:
            if options["json"]:
                self.stdout.write(json.dumps({"error": exc.code, "message": exc.message}))
            else:
                self.stderr.write(f"audit_purge: {exc.message}")
            sys.exit(2 if exc.code == "bad_retention" else 1)
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict()))
        elif report.dry_run:
            self.stdout.write(f"{report.matched} audit records are older than {report.retention_days} days "
                              f"(before {report.cutoff[:10]}); nothing was changed (--dry-run).")
        elif not report.matched:
            self.stdout.write(f"No audit record is older than {report.retention_days} days.")
        else:
            self.stdout.write(f"Archived {report.archived} audit records to {report.archive} and deleted "
                              f"{report.deleted}.")
