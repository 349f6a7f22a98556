"""``manage.py privacy export --learner ID [--out FILE] [--json]`` and ``manage.py privacy erase --learner ID [--yes]
[--json]``: one learner's data, found by their LMS pseudonym, a conversation id or a hand-off's token
(``audit.privacy.learners``), exported as one JSON document or erased everywhere (``audit.privacy.erasure``).

``export`` prints what it found, and writes the document to ``--out`` (readable by its owner only); with ``--json``
it prints the document itself. ``erase`` says what it will erase and asks for ``yes`` first (``--yes``: no
question, for scripts); it leaves a tombstone that a restore applies again. Both are written to the command-line log
(``StaffCommand``), an erasure by its tombstone's id, never by the learner's. Exit status: 0 done, 2 refused (an
unknown or malformed learner, an erasure not confirmed, a file that exists), 1 the database unavailable.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from audit.privacy.erasure import erase_learner, export_learner
from audit.privacy.learners import find_learner
from bookchat.base.errors import DATABASE_ERRORS, BookchatError, RequestError, exit_command
from bookchat.base.models import StaffCommand

COUNTED = {"conversations": "conversation(s)", "audit_rows": "audit row(s)", "archived_audit_rows": "archived "
           "audit row(s)", "feedback": "feedback", "handoffs": "hand-off(s)", "lms_users": "LMS user record(s)",
           "staff_answers_from_their_questions": "staff answer(s) written from their questions"}


class Command(BaseCommand):
    help = "Export or erase one learner's data (by LMS pseudonym, conversation id or hand-off token)."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parts = parser.add_subparsers(dest="action", required=True, metavar="{export,erase}")
        export = parts.add_parser("export", help="Everything held about the learner, as one JSON document.")
        export.add_argument("--out", metavar="FILE", help="Write the document to FILE (it must not exist).")
        erase = parts.add_parser("erase", help="Erase the learner's words and links everywhere.")
        erase.add_argument("--yes", action="store_true", help="Erase without asking.")
        for sub in (export, erase):
            sub.add_argument("--learner", required=True, metavar="ID",
                             help="LMS pseudonym, conversation id (session_id) or hand-off token; write --learner=ID "
                                  "for a token that starts with '-'.")
            sub.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options) -> None:
        try:
            learner = find_learner(identifier=options["learner"])
            getattr(self, f"_{options['action']}")(learner, options)
        except BookchatError as exc:
            exit_command(self, exc, as_json=options["json"], status=2)
        except DATABASE_ERRORS as exc:
            exit_command(self, exc, as_json=options["json"], status=1)

    def _export(self, learner, options: dict) -> None:
        document = export_learner(learner=learner)
        text = json.dumps(document, default=str, ensure_ascii=False, indent=2)
        if options["out"]:
            write_new(Path(options["out"]), text)
        StaffCommand.record("privacy export", "exported a learner's data", options["out"] or "")
        if options["json"]:
            self.stdout.write(text)
            return
        self.stdout.write(f"Held about this learner: {summary(document)}."
                          + (f"\nWritten to {options['out']}." if options["out"] else
                             "\nAdd --out FILE to write the document, or --json to print it."))

    def _erase(self, learner, options: dict) -> None:
        found = summary(export_learner(learner=learner))
        if not options["yes"]:
            self.stderr.write(f"This erases the learner's words and links: {found}. It can't be undone.")
            self.stderr.flush()
            if not sys.stdin.isatty() or input("Type yes to erase: ").strip().lower() != "yes":
                raise RequestError("nothing was erased (not confirmed; --yes erases without asking)",
                                   code="not_confirmed")
        report = erase_learner(learner=learner)
        StaffCommand.record("privacy erase", "erased a learner's data", f"erasure {report.erasure}")
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict()))
            return
        self.stdout.write(f"Erased (tombstone {report.erasure}): {report.conversations} conversation(s), "
                          f"{report.audit_rows} audit row(s) and {report.archived_rows} archived, "
                          f"{report.handoffs} hand-off(s), {report.feedback} feedback, {report.lms_users} LMS user "
                          f"record(s); {report.staff_answers} staff answer(s) wait for review without the question.")


def summary(document: dict) -> str:
    return ", ".join(f"{len(document[key])} {label}" for key, label in COUNTED.items())


def write_new(path: Path, text: str) -> None:
    """``text`` into a new file readable by its owner only; RequestError when it exists or can't be made."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise RequestError(f"{path} exists: choose another name", code="destination_exists") from None
    except OSError as exc:
        raise RequestError(f"{path} can't be written ({exc.strerror})", code="not_writable") from None
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
