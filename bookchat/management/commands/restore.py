"""``manage.py restore ARCHIVE [--force] [--with-secrets] [--json]``: bring a backup (``manage.py backup``) into
this install's database (embedded, or the one ``DATABASE_URL`` names) and data folder, then migrate it.

The archive is checked whole first; a database that already holds bookchat's data is refused unless ``--force``,
which replaces it. What will be replaced, and the notes about the secret key, are printed on stderr once the checks
pass and before anything changes (with or without ``--json``); the summary when the restore is done.
Exit status: 0 restored, 1 failed (the database is left as it was), 2 refused (a database
with data and no ``--force``, a backup from a newer bookchat, no such file).
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from bookchat.base.errors import DATABASE_ERRORS, BookchatError, exit_command
from bookchat.restoring import RestoreReport, restore_archive


class Command(BaseCommand):
    help = "Restore a backup made by `manage.py backup` into this install (embedded or DATABASE_URL), then migrate."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("archive", metavar="ARCHIVE", help="The backup file.")
        parser.add_argument("--force", action="store_true",
                            help="Replace the database even when it holds bookchat's data: that data is deleted.")
        parser.add_argument("--with-secrets", action="store_true",
                            help="Restore the secret key too, when the backup holds it.")
        parser.add_argument("--json", action="store_true", help="Print a summary as one JSON object.")

    def handle(self, *args, **options) -> None:
        try:
            report = restore_archive(Path(options["archive"]), force=options["force"],
                                     with_secrets=options["with_secrets"], before_changes=self.announce)
        except (BookchatError, *DATABASE_ERRORS) as exc:
            exit_command(self, exc, as_json=options["json"])
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict()))
            return
        files = report.files
        migrated = (f"applied {len(report.migrations_applied)} migration(s) the backup lacked"
                    if report.migrations_applied else "no migration needed")
        self.stdout.write(
            f"Restored {report.archive} (bookchat {report.bookchat_version}, made {report.created_at}) in "
            f"{report.seconds:.1f} s:\n"
            f"  the database {report.database['name']} ({report.database['source']}); {migrated}\n"
            f"  {files.get('uploads', 0)} upload file(s), {files.get('archive', 0)} audit archive(s)"
            + "".join(f"\n  an existing archive of the same name was kept as {p}"
                      for p in files.get("archives_kept_aside", []))
            + f"\n  {erasures_line(report.erasures)}"
            + f"\n  the secret key: {KEY_FATES.get(report.secret_key, report.secret_key)}"
            + (f"; {report.secret_key_fallbacks_added} older key(s) it accepted added to this install's fallbacks"
               if report.secret_key_fallbacks_added else ""))

    def announce(self, report: RestoreReport) -> None:
        """What is about to be replaced and what the key's fate means, before the restore changes anything."""
        if report.replaced:
            held = ", ".join(f"{what}: {n}" for what, n in report.database["replaced_rows"].items())
            self.stderr.write(f"WARNING: --force: the data in the database {report.database['name']} ({held}) is being "
                              "REPLACED by the backup's: it will be gone.")
        for warning in report.warnings:
            self.stderr.write(f"Note: {warning}")
        self.stderr.flush()


KEY_FATES = {"not_in_backup": "not in the backup", "already_in_use": "already this install's",
             "one_of_the_fallbacks": "the backed-up key is one of this install's fallbacks: what it signed stays "
             "valid while it is listed", "not_restored": "not restored", "restored": "restored"}


def erasures_line(erasures: dict) -> str:
    """What applying the erasures' tombstones again did (``audit.privacy.tombstones.reapply``)."""
    done = erasures.get("erased")
    if not done:
        return f"{erasures.get('tombstones', 0)} erasure(s) applied again: nothing of an erased learner was back"
    return (f"{erasures['tombstones']} erasure(s) applied again: erased again {done['conversations']} conversation(s),"
            f" {done['audit_rows']} audit row(s), {done['archived_rows']} archived row(s), {done['handoffs']} "
            "hand-off(s) the backup still held")
