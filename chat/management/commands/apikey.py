"""``manage.py apikey create|list|revoke|rotate``: API keys from a shell, as the admin makes them
(``chat.channels.keys``).

``create`` prints the new key once (only its hash is stored); ``list`` shows every key but never a
key's value; ``revoke PREFIX`` deactivates one key; ``rotate PREFIX --overlap 24h`` creates its successor
(printed once) and keeps the old key valid that much longer. Human text, or one JSON object with ``--json``.
``create --kind secret --publish SLUG`` makes the key a book's CI publishes it with (it does nothing else; the
book need not exist yet, and ``--name`` may be left out).
Exit status: 0 done, 2 the options are wrong (unknown kind or book, a publishable key without an
origin, a secret key with one, a malformed origin, a publishable key that publishes, an unknown or ambiguous
prefix).
"""

from __future__ import annotations

import json
import sys
from datetime import datetime

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from bookchat.base.errors import BookchatError
from bookchat.base.models import StaffCommand
from chat.channels.keys import (
    ApiKeyError,
    api_key_create,
    api_key_list,
    api_key_revoke,
    api_key_rotate,
    api_key_summary,
    parse_overlap,
)
from chat.models import ApiKey


class Command(BaseCommand):
    help = "Create, list or revoke API keys for the REST API and the widget."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{create,list,revoke}")
        create = actions.add_parser("create", help="Create a key and print it (shown only this once).")
        create.add_argument("--kind", required=True, choices=[ApiKey.PUBLISHABLE, ApiKey.SECRET],
                            help="publishable (pk_…, for the widget in web pages) or secret (sk_…, for servers).")
        create.add_argument("--name", default="", help="What the key is for, e.g. the docs site it serves "
                            "(required but with --publish).")
        create.add_argument("--origin", dest="origins", action="append", default=[], metavar="URL",
                            help="An origin allowed to use a publishable key, like https://docs.example.org "
                                 "(repeat for several; a publishable key needs one).")
        create.add_argument("--book", help="Limit the key to this book (default: every book).")
        create.add_argument("--publish", metavar="SLUG", help="A secret key that publishes this book from its CI "
                            "(POST /api/v1/books/SLUG/sources) and does nothing else; the book need not exist yet.")
        listing = actions.add_parser("list", help="List the keys (never their values).")
        revoke = actions.add_parser("revoke", help="Revoke the key whose prefix starts with PREFIX.")
        revoke.add_argument("prefix", metavar="PREFIX", help="The key's prefix as `list` shows it (e.g. pk_AbC12).")
        rotate = actions.add_parser("rotate", help="Create a new key like the one PREFIX names and keep the old one "
                                    "valid for --overlap more, then refuse it.")
        rotate.add_argument("prefix", metavar="PREFIX", help="The key's prefix as `list` shows it (e.g. pk_AbC12).")
        rotate.add_argument("--overlap", default="24h", help="How long the old key keeps working: 90m, 24h, 7d "
                            "(at most 90 days; 0: refused at once). Default: 24h.")
        for sub in (create, listing, revoke, rotate):
            sub.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options) -> None:
        action, as_json = options["action"], options["json"]
        try:
            if action == "create":
                if not options["name"].strip() and not options["publish"]:
                    raise ApiKeyError("--name is required: say what the key is for", field="name")
                key, raw = api_key_create(kind=options["kind"], name=options["name"], origins=options["origins"],
                                          book_slug=options["book"], publish_book=options["publish"])
                result = {"key": raw} | api_key_summary(key)
                text = _created(result)
                StaffCommand.record(f"apikey create --kind {key.kind}", "created API key",
                                    f"{key.prefix}… ({key.name})")
            elif action == "rotate":
                new, raw, old = api_key_rotate(prefix=options["prefix"], overlap=parse_overlap(options["overlap"]))
                result = {"key": raw} | api_key_summary(new) | {"replaces": api_key_summary(old)}
                StaffCommand.record(f"apikey rotate {options['prefix']} --overlap {options['overlap']}",
                                    "rotated API key", f"{old.prefix}… → {new.prefix}… ({new.name})")
                text = (_created(result) + f"\n\nThe old key {old.prefix}… keeps working until "
                        f"{old.expires_at:%Y-%m-%d %H:%M %Z}, then it is refused.")
            elif action == "list":
                keys = [api_key_summary(key) for key in api_key_list()]
                result, text = {"keys": keys}, _table(keys)
            else:
                result = api_key_summary(api_key_revoke(prefix=options["prefix"]))
                StaffCommand.record(f"apikey revoke {options['prefix']}", "revoked API key",
                                    f"{result['prefix']}… ({result['name']})")
                text = f"Revoked the {result['kind']} key {result['prefix']}… ({result['name']})."
        except BookchatError as exc:
            if as_json:
                self.stdout.write(json.dumps({"error": exc.code, "message": exc.message}, ensure_ascii=False))
            else:
                self.stderr.write(f"apikey {action}: {exc.message}")
            sys.exit(2)
        self.stdout.write(json.dumps(result, ensure_ascii=False) if as_json else text)


def _created(key: dict) -> str:
    if key["publishes"]:
        return (f"Created the secret key {key['prefix']}… ({key['name']}) that publishes the book {key['publishes']} "
                f"and does nothing else.\nCopy it now (into the book's CI secrets); it is shown only this once:\n\n"
                f"{key['key']}")
    scope = f"book {key['book']}" if key["book"] else "every book"
    origins = f", from {', '.join(key['origins'])}" if key["origins"] else ""
    return (f"Created the {key['kind']} key {key['prefix']}… ({key['name']}) for {scope}{origins}.\n"
            f"Copy it now; it is shown only this once:\n\n{key['key']}")


def _state(key: dict) -> str:
    if not key["active"]:
        return "revoked"
    if not key["expires"]:
        return "yes"
    expires = datetime.fromisoformat(key["expires"])
    return f"until {expires:%Y-%m-%d %H:%M}" if expires > timezone.now() else "expired"


def _table(keys: list[dict]) -> str:
    if not keys:
        return "No API keys. Create one with `manage.py apikey create`."
    header = ("prefix", "kind", "name", "book", "active", "created", "last used", "origins")
    rows = [(k["prefix"], k["kind"], k["name"], f"publishes {k['publishes']}" if k["publishes"] else
             k["book"] or "(every book)", _state(k),
             k["created"][:16].replace("T", " "), (k["last_used"] or "never")[:16].replace("T", " "),
             " ".join(k["origins"]) or "-") for k in keys]
    widths = [max(len(str(row[i])) for row in (header, *rows)) for i in range(len(header) - 1)]
    return "\n".join("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=False)) +
                     "  " + str(row[-1]) for row in (header, *rows))
