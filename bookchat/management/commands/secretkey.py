"""``manage.py secretkey {status,rotate,drop-fallbacks} [--json]``: the secret key bookchat generated into the data
folder (``bookchat.base.secret_keys``). ``rotate`` writes a new one and keeps the old one as a fallback,
``drop-fallbacks`` ends that overlap, ``status`` says where the key and its fallbacks come from (never a key).

Exit status: 0 done, 1 failed, 2 refused (``rotate`` while ``BOOKCHAT_SECRET_KEY`` is set) or a wrong subcommand.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from bookchat.base import secret_keys
from bookchat.base.errors import exit_command


class Command(BaseCommand):
    help = "Rotate the secret key bookchat generated into the data folder, end the overlap, or say where it comes from."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{status,rotate,drop-fallbacks}")
        subs = [
            actions.add_parser("status", help="Where the key and its fallbacks come from (never a key)."),
            actions.add_parser("rotate", help="Write a new generated key; the old one stays accepted as a fallback "
                               "until drop-fallbacks. Refused when BOOKCHAT_SECRET_KEY is set."),
            actions.add_parser("drop-fallbacks", help="End the overlap: forget the old keys rotate kept."),
        ]
        for sub in subs:
            sub.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options) -> None:
        action, as_json = options["action"], options["json"]
        data_dir = Path(settings.DATA_DIR)
        key_from_environment = settings.BOOKCHAT["SECRET_KEY"]
        if action == "status":
            report = secret_keys.status(data_dir, key_from_environment=key_from_environment,
                                        fallbacks_from_environment=settings.BOOKCHAT["SECRET_KEY_FALLBACKS"])
            self.stdout.write(json.dumps(report) if as_json else _status_text(report))
            return
        try:
            if action == "rotate":
                change = secret_keys.rotate(data_dir, key_from_environment=key_from_environment)
            else:
                change = secret_keys.drop_fallbacks(data_dir)
        except secret_keys.SecretKeyError as exc:
            exit_command(self, exc, as_json=as_json)
        except OSError as exc:
            exit_command(self, secret_keys.SecretKeyError(f"the key files in {data_dir} can't be written: "
                                                          f"{exc.strerror or exc}", code="not_writable"),
                         as_json=as_json)
        self.stdout.write(json.dumps(change.as_dict()) if as_json else _change_text(change, key_from_environment))


def _status_text(report: dict) -> str:
    source = ("BOOKCHAT_SECRET_KEY (the environment): the operator owns it" if report["key_source"] != "data folder"
              else f"the generated file {report['key_file']}"
              + ("" if report["key_file_exists"] else " (not written yet: the next start writes it)"))
    counts = report["fallbacks"]
    lines = [f"The secret key: {source}.",
             f"Fallbacks (older keys still accepted): {counts['BOOKCHAT_SECRET_KEY_FALLBACKS']} from "
             f"BOOKCHAT_SECRET_KEY_FALLBACKS, {counts['data folder']} from {report['fallbacks_file']}."]
    lines += [f"Warning: {path} is readable by other users: chmod 600 it." for path in report["readable_by_others"]]
    return "\n".join(lines)


def _change_text(change: secret_keys.KeyChange, key_from_environment: str) -> str:
    if change.action == "nothing_to_drop":
        return f"No fallbacks to drop: {change.fallbacks_file} does not exist. Nothing changed."
    if change.action == "dropped":
        return (f"Removed {change.fallbacks_file} ({change.fallbacks_in_file} older key(s)): what they signed is no "
                f"longer accepted once the processes restart; {change.restart}.")
    note = ("\nBOOKCHAT_SECRET_KEY is set, so this file's key is not the one in force." if key_from_environment
            else "")
    return (f"Wrote a new secret key to {change.key_file}; the previous one is kept in {change.fallbacks_file} "
            f"({change.fallbacks_in_file} older key(s) there), so sessions and queued tasks signed with it stay "
            f"valid.\nTo use the new key, {change.restart}; until then they sign with the old one.\n"
            "When the overlap is over (a day, or your session lifetime), run `manage.py secretkey drop-fallbacks` "
            f"and restart them again.{note}")
