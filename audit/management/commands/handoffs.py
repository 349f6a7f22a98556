"""``manage.py handoffs list|answer|decline --book SLUG [--json]``: a book's hand-offs to the course staff from a
shell, as the admin's inbox shows them and acts on them (``audit.handoffs``).

``list`` shows the book's hand-offs, open ones first and oldest first (``--status`` narrows them); ``answer ID``
replies with the Markdown of ``--answer-file`` (``-``: standard input) citing each ``--source`` (a section's URL, or
a passage id), kept as a staff answer unless ``--no-keep`` (default: ``BOOKCHAT_STAFF_ANSWERS``); ``decline ID``
closes it with ``--reason``, which the student reads. Answers and declines are logged as staff actions
(``StaffCommand``). Human text, or one JSON object with ``--json``. Exit status: 0 done, 2 refused (an unknown book
or hand-off, another book's hand-off, a closed one, a citation that is not a section of the book, an empty or
over-long answer or reason, a file that can't be read), 1 the database unavailable.
"""

from __future__ import annotations

import json
import sys
from argparse import BooleanOptionalAction

from django.core.management.base import BaseCommand, CommandParser
from django.core.serializers.json import DjangoJSONEncoder
from django.db import InterfaceError, OperationalError

from audit import handoffs
from audit.models import Handoff
from bookchat.base.errors import BookchatError, NotFound, RequestError, exit_command
from bookchat.base.models import StaffCommand
from chat.pipeline.staff_answers import MAX_ANSWER_CHARS
from ingestion.models import Book

STATUSES = ["all", *Handoff.Status.values]


def read_answer(path: str) -> str:
    """The answer's Markdown from ``path`` (``-``: standard input), UTF-8, or a refusal that says why not."""
    limit = MAX_ANSWER_CHARS * 4 + 1  # bytes enough for the longest answer in any UTF-8, and one more
    try:
        if path == "-":
            data = sys.stdin.buffer.read(limit)
        else:
            with open(path, "rb") as file:
                data = file.read(limit)
    except OSError as exc:
        raise RequestError(f"cannot read {path}: {exc.strerror or exc}", code="unreadable_file",
                           field="answer_file") from None
    if b"\x00" in data:
        raise RequestError(f"{path} is not text (it holds NUL bytes)", code="not_text", field="answer_file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError(f"{path} is not UTF-8 text", code="not_text", field="answer_file") from None
    if len(data) == limit:
        raise RequestError(f"{path} is longer than an answer may be ({MAX_ANSWER_CHARS:,} characters)",
                           code="answer_too_long", field="answer_file")
    return text


def root_book(slug: str) -> Book:
    """The book students read by ``slug`` (a root book); an edition's slug names its root's."""
    book = Book.objects.filter(slug=slug).select_related("edition_of").first()
    if book is None:
        raise RequestError(f"unknown book {slug!r}", code="unknown_book", field="book")
    return book.root


def handoff_of(book: Book, handoff_id: str) -> Handoff:
    """Hand-off ``handoff_id`` of ``book``; another book's is as unknown as one that doesn't exist."""
    found = None
    if str(handoff_id).isdigit() and len(str(handoff_id)) <= 18:
        found = Handoff.objects.filter(pk=int(handoff_id), book_slug=book.slug).first()
    if found is None:
        raise NotFound(f"the book {book.slug!r} has no hand-off {str(handoff_id)[:40]!r}", code="unknown_handoff")
    return found


class Command(BaseCommand):
    help = "List, answer or decline a book's hand-offs to the course staff."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="{list,answer,decline}")
        listing = actions.add_parser("list", help="The book's hand-offs, open ones first and oldest first.")
        listing.add_argument("--status", choices=STATUSES, default="all", help="Only those of this status.")
        answer = actions.add_parser("answer", help="Reply to a hand-off: the student reads it.")
        answer.add_argument("handoff", metavar="ID", help="The hand-off's number, as `list` shows it.")
        answer.add_argument("--answer-file", required=True, metavar="FILE",
                            help="The reply in Markdown, `[1]` citing the first --source (`-`: standard input).")
        answer.add_argument("--source", dest="sources", action="append", default=[], metavar="URL",
                            help="A section cited: its URL as the book's site shows it, or a passage id (repeat "
                                 "for several, in the order [1], [2]…).")
        answer.add_argument("--keep", action=BooleanOptionalAction, default=None,
                            help="Keep the reply as a staff answer (--no-keep: don't). Default: "
                                 "BOOKCHAT_STAFF_ANSWERS.")
        decline = actions.add_parser("decline", help="Close a hand-off without an answer, saying why.")
        decline.add_argument("handoff", metavar="ID", help="The hand-off's number, as `list` shows it.")
        decline.add_argument("--reason", required=True, help="Why, as the student reads it.")
        for sub in (listing, answer, decline):
            sub.add_argument("--book", required=True, metavar="SLUG", help="The book whose hand-offs these are.")
            sub.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options) -> None:
        action, as_json = options["action"], options["json"]
        try:
            book = root_book(options["book"])
            if action == "list":
                result, text = self._list(book, options["status"])
            elif action == "answer":
                result, text = self._answer(book, options)
            else:
                result, text = self._decline(book, options)
        except BookchatError as exc:
            exit_command(self, exc, as_json=as_json, status=2)
        except (OperationalError, InterfaceError) as exc:
            exit_command(self, exc, as_json=as_json, status=1)
        self.stdout.write(json.dumps(result, ensure_ascii=False, cls=DjangoJSONEncoder) if as_json else text)

    def _list(self, book: Book, status: str) -> tuple[dict, str]:
        rows = Handoff.objects.filter(book_slug=book.slug).select_related("replied_by")
        if status != "all":
            rows = rows.filter(status=status)
        found = sorted(rows, key=lambda h: (h.status != Handoff.Status.OPEN, h.created_at))
        lines = [f"{h.pk:>6}  {h.created_at:%Y-%m-%d %H:%M}  {h.status:<9} {h.question[:70]}"
                 + (f"\n        note: {' '.join(h.note.split())[:100]}" if h.note else "") for h in found]
        text = "\n".join(lines) if lines else f"No hand-off of {book.slug}" + ("" if status == "all" else
                                                                              f" is {status}") + "."
        return {"book": book.slug, "handoffs": [handoffs.summary(h) for h in found]}, text

    def _answer(self, book: Book, options: dict) -> tuple[dict, str]:
        handoff = handoff_of(book, options["handoff"])
        answer = read_answer(options["answer_file"])
        editing = handoff.status == Handoff.Status.ANSWERED
        handoffs.reply(handoff, answer=answer, citations=options["sources"], keep=options["keep"])
        kept = f", kept as staff answer {handoff.staff_answer_id}" if handoff.staff_answer_id else ""
        StaffCommand.record(f"handoffs answer {handoff.pk} --book {book.slug}",
                            "edited a hand-off's reply" if editing else "answered a hand-off",
                            f"hand-off {handoff.pk} ({book.slug}){kept}")
        return handoffs.summary(handoff), (f"Answered hand-off {handoff.pk} citing {len(handoff.citations)} "
                                           f"section(s){kept}.")

    def _decline(self, book: Book, options: dict) -> tuple[dict, str]:
        handoff = handoff_of(book, options["handoff"])
        handoffs.decline(handoff, reason=options["reason"])
        StaffCommand.record(f"handoffs decline {handoff.pk} --book {book.slug}", "declined a hand-off",
                            f"hand-off {handoff.pk} ({book.slug})")
        return handoffs.summary(handoff), f"Declined hand-off {handoff.pk}; the student reads your reason."
