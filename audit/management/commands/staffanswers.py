"""``manage.py staffanswers list|add|retire --book SLUG [--json]``: a book's staff answers from a shell, the answers
the course staff wrote that later students who ask the same thing get (``audit.staff_answer_actions``).

``list`` shows the book's staff answers with how often each was served and its thumbs (``--status`` narrows them);
``add --question … --answer-file F [--source URL]…`` adds one, served from now on; ``retire ID`` stops serving one
(the admin brings it back). Adds and retirements are logged as staff actions (``StaffCommand``). Human text, or one
JSON object with ``--json``. Exit status: 0 done, 2 refused (an unknown book or staff answer, another book's, an
empty or over-long question or answer, a source that is not a section of the book, a file that can't be read, a
staff answer retired already), 1 the database unavailable.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandParser
from django.core.serializers.json import DjangoJSONEncoder
from django.db import InterfaceError, OperationalError

from audit.management.commands.handoffs import read_answer, root_book
from audit.staff_answer_actions import add_staff_answer, of_book, retire_staff_answer, staff_answer_summary
from bookchat.base.errors import BookchatError, exit_command
from bookchat.base.models import StaffCommand
from chat.models import StaffAnswer
from ingestion.models import Book

STATUSES = ["all", *StaffAnswer.Status.values]


class Command(BaseCommand):
    help = "List, add or retire a book's staff answers."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{list,add,retire}")
        listing = actions.add_parser("list", help="The book's staff answers, with how often each was served.")
        listing.add_argument("--status", choices=STATUSES, default="all", help="Only those of this status.")
        add = actions.add_parser("add", help="Add a staff answer, served from now on.")
        add.add_argument("--question", required=True, help="The question it answers, as a student would ask it.")
        add.add_argument("--answer-file", required=True, metavar="FILE",
                         help="The answer in Markdown, `[1]` citing the first --source (`-`: standard input).")
        add.add_argument("--source", dest="sources", action="append", default=[], metavar="URL",
                         help="A section cited: its URL as the book's site shows it, or a passage id (repeat for "
                              "several, in the order [1], [2]…).")
        retire = actions.add_parser("retire", help="Stop serving a staff answer.")
        retire.add_argument("staff_answer", metavar="ID", help="The staff answer's number, as `list` shows it.")
        for sub in (listing, add, retire):
            sub.add_argument("--book", required=True, metavar="SLUG", help="The book whose staff answers these are.")
            sub.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options) -> None:
        action, as_json = options["action"], options["json"]
        try:
            book = root_book(options["book"])
            if action == "list":
                result, text = self._list(book, options["status"])
            elif action == "add":
                found = add_staff_answer(book=book, question=options["question"],
                                         answer=read_answer(options["answer_file"]), citations=options["sources"])
                StaffCommand.record(f"staffanswers add --book {book.slug}", "added a staff answer",
                                    f"staff answer {found.pk} ({book.slug}): {found.question[:200]}")
                result, text = staff_answer_summary(found), f"Added staff answer {found.pk}; it is served from now on."
            else:
                found = retire_staff_answer(of_book(book, options["staff_answer"]))
                StaffCommand.record(f"staffanswers retire {found.pk} --book {book.slug}", "retired a staff answer",
                                    f"staff answer {found.pk} ({book.slug})")
                result, text = staff_answer_summary(found), f"Retired staff answer {found.pk}; it is no longer served."
        except BookchatError as exc:
            exit_command(self, exc, as_json=as_json, status=2)
        except (OperationalError, InterfaceError) as exc:
            exit_command(self, exc, as_json=as_json, status=1)
        self.stdout.write(json.dumps(result, ensure_ascii=False, cls=DjangoJSONEncoder) if as_json else text)

    def _list(self, book: Book, status: str) -> tuple[dict, str]:
        rows = StaffAnswer.objects.filter(book=book).select_related("book", "created_by").order_by("-answered_at")
        if status != "all":
            rows = rows.filter(status=status)
        found = list(rows)
        lines = [f"{a.pk:>6}  {a.answered_at:%Y-%m-%d}  {a.status:<12} served {a.served:>4}  "
                 f"+{a.thumbs_up}/-{a.thumbs_down}  {a.question[:60]}" for a in found]
        text = "\n".join(lines) if lines else f"No staff answer of {book.slug}" + (
            "" if status == "all" else f" is {status}") + "."
        return {"book": book.slug, "staff_answers": [staff_answer_summary(a) for a in found]}, text
