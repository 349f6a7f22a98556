"""``manage.py twofactor``: staff users' second factor (``bookchat.twofactor``). Without options, who has an
authenticator app and how many recovery codes are left; ``--reset USERNAME`` deletes a user's app and recovery
codes (a lost phone), so that they log in with their password alone and set up again (in ``required`` mode,
before anything else)."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand

from bookchat.base.errors import BookchatError
from bookchat.base.models import StaffCommand
from bookchat.twofactor.devices import required, staff_states, twofactor_reset


class Command(BaseCommand):
    help = ("List staff users' two-factor state (authenticator app, recovery codes left), or --reset USERNAME to "
            "delete a user's authenticator app and recovery codes.")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--reset", metavar="USERNAME", help="Delete this user's authenticator app and recovery "
                                                                "codes, so that they set up again.")
        parser.add_argument("--json", action="store_true", help="Print the outcome as JSON.")

    def handle(self, *args, **options) -> None:
        as_json = options["json"]
        if options["reset"] is None:
            result = {"mode": "required" if required() else "optional", "staff": staff_states()}
            self.stdout.write(json.dumps(result) if as_json else _table(result))
            return
        try:
            result = twofactor_reset(username=options["reset"])
        except BookchatError as exc:
            if as_json:
                self.stdout.write(json.dumps({"error": exc.code, "message": exc.message}))
            else:
                self.stderr.write(f"twofactor --reset: {exc.message}")
            sys.exit(1)
        StaffCommand.record(f"twofactor --reset {result['username']}", "reset second factor", result["username"])
        self.stdout.write(json.dumps(result) if as_json else _reset_message(result))


def _table(result: dict) -> str:
    lines = [f"Two-factor authentication is {result['mode']} for staff (BOOKCHAT_ADMIN_2FA)."]
    if not result["staff"]:
        return "\n".join(lines + ["No active staff users."])
    width = max(len(user["username"]) for user in result["staff"])
    for user in result["staff"]:
        app = "authenticator app" if user["app"] else "no authenticator app"
        role = " (superuser)" if user["superuser"] else ""
        lines.append(f"  {user['username']:<{width}}  {app}, {user['recovery_codes_left']} recovery codes left{role}")
    return "\n".join(lines)


def _reset_message(result: dict) -> str:
    if not result["had_app"] and not result["recovery_codes_deleted"]:
        return f"{result['username']} had no authenticator app; nothing to reset."
    return (f"Deleted {result['username']}'s authenticator app and {result['recovery_codes_deleted']} recovery codes: "
            f"they log in with their password and set up a new app from the admin's Two-factor authentication page.")
