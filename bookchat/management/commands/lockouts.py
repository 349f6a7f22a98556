"""``manage.py lockouts``: who is locked out of the admin now, and lifting a lockout (``bookchat.logins``).

``lockouts`` lists the user names and client addresses locked out after too many failed logins (``--all``:
also those with failures short of a lockout); ``--lift NAME`` forgets a user name's failed logins,
``--lift-address ADDRESS`` an address's, ``--lift-all`` everyone's. Human text, or one JSON object with
``--json``. Exit status: 0 done (also when there was nothing to lift, which is said), 2 wrong options.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from bookchat.base.models import StaffCommand
from bookchat.logins import current_lockouts, lift, lockout_minutes


class Command(BaseCommand):
    help = "List admin login lockouts (too many failed logins), or lift one."

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--lift", metavar="NAME", help="Lift the lockout of this user name.")
        which.add_argument("--lift-address", metavar="ADDRESS", help="Lift the lockout of this client address.")
        which.add_argument("--lift-all", action="store_true", help="Lift every lockout and forget every failure.")
        parser.add_argument("--all", action="store_true",
                            help="List also names and addresses with failed logins short of a lockout.")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options) -> None:
        if options["lift"] is not None or options["lift_address"] is not None or options["lift_all"]:
            self._lift(options)
            return
        found = current_lockouts(include_unlocked=options["all"])
        if options["json"]:
            self.stdout.write(json.dumps({"lockout_minutes": lockout_minutes(),
                                          "lockouts": [f.as_dict() for f in found]}))
            return
        if not found:
            self.stdout.write("Nobody is locked out." if not options["all"] else
                              f"No failed logins in the last {lockout_minutes()} minutes.")
            return
        for f in found:
            state = f"locked out until {f.until:%Y-%m-%d %H:%M %Z}" if f.locked else "not locked out"
            self.stdout.write(f"{f.kind} {f.value}: {f.failures} failed login(s), the last at "
                              f"{f.last_failure:%Y-%m-%d %H:%M %Z}; {state}")

    def _lift(self, options: dict) -> None:
        name, address = options["lift"], options["lift_address"]
        if (name is not None and not name.strip()) or (address is not None and not address.strip()):
            raise CommandError("Give the user name or address whose lockout to lift.", returncode=2)
        cleared = lift(username=name, address=address)
        target = f"user {name}" if name is not None else f"address {address}" if address is not None else "everyone"
        option = f"--lift {name}" if name is not None else f"--lift-address {address}" if address is not None \
            else "--lift-all"
        StaffCommand.record(f"lockouts {option}", "lifted lockout", f"{target}: {cleared} record(s)")
        if options["json"]:
            self.stdout.write(json.dumps({"lifted": target, "records": cleared}))
        elif cleared:
            self.stdout.write(f"Lifted: {target} ({cleared} record(s) of failed logins forgotten).")
        else:
            self.stdout.write(f"Nothing to lift: no failed logins recorded for {target}.")
