"""``manage.py gaps [--book SLUG] [--days N] [--markdown | --json]``: the coverage gaps, what readers asked that the
book doesn't answer well (``audit.gaps``), grouped by meaning, biggest first.

Human text by default; ``--markdown`` the report to paste into an issue of the book's repository (as the admin's
Coverage gaps page exports it); ``--json`` one object. Exit status: 0 done (with or without gaps), 2 bad options
(an unknown book).
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandParser

from audit.gaps import coverage_gaps, gaps_markdown
from bookchat.base.errors import BookchatError, exit_command
from ingestion.models import Book


class Command(BaseCommand):
    help = "The questions readers asked that the book doesn't answer well, grouped, biggest first."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--book", help="Only this book's questions (default: every book's).")
        parser.add_argument("--days", type=int, default=90, help="The period, in days up to now (default 90).")
        output = parser.add_mutually_exclusive_group()
        output.add_argument("--markdown", action="store_true", help="Markdown for an issue in the book's repository.")
        output.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options) -> None:
        book, days = options["book"], options["days"]
        if book and not Book.objects.filter(slug=book).exists():
            exit_command(self, BookchatError(f"unknown book {book!r}", code="unknown_book"), as_json=options["json"],
                         status=2)
        if days < 1:
            exit_command(self, BookchatError("--days must be at least 1", code="bad_days"), as_json=options["json"],
                         status=2)
        gaps = coverage_gaps(days=days, book=book)
        if options["markdown"]:
            self.stdout.write(gaps_markdown(gaps, book=book, days=days), ending="")
        elif options["json"]:
            self.stdout.write(json.dumps({"book": book, "days": days, "gaps": [
                {"count": gap.count, "refused": gap.refused, "searched": gap.searched, "staff": gap.staff,
                 "examples": gap.examples,
                 "sections": [{"heading_path": name, "url": gap.links.get(name)} for name in gap.nearest_sections],
                 "books": gap.book_list, "last_asked": gap.last_asked.isoformat() if gap.last_asked else None}
                for gap in gaps]}, ensure_ascii=False))
        elif not gaps:
            self.stdout.write(f"No coverage gap in the last {days} days.")
        else:
            for gap in gaps:
                self.stdout.write(f"{gap.count:4d}× {gap.label}  (closest: {', '.join(gap.nearest_sections) or '—'})")
