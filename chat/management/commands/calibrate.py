"""``manage.py calibrate [--book SLUG]``: measure a book's "not covered" threshold again.

Indexing does this by itself when a book's passages change; run it after changing
``BOOKCHAT_FUSION`` or ``BOOKCHAT_SCOPE_COVERAGE_WEIGHT``. Exit 2 when the book is unknown.
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandParser

from chat.pipeline.calibration import calibrate_book
from ingestion.models import Book


class Command(BaseCommand):
    help = "Re-measure the scope threshold of one book (or every book)."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--book", help="Book slug (default: every book).")
        parser.add_argument("--json", action="store_true", help="Print {slug: details} as one JSON object.")

    def handle(self, *args, **options) -> None:
        books = Book.objects.order_by("slug")
        if options["book"]:
            books = books.filter(slug=options["book"])
            if not books.exists():
                message = f"there is no book {options['book']!r}"
                if options["json"]:
                    self.stdout.write(json.dumps({"error": "unknown_book", "message": message}))
                else:
                    self.stderr.write(f"calibrate: {message}")
                sys.exit(2)
        results = {book.slug: calibrate_book(book) for book in books}
        if options["json"]:
            self.stdout.write(json.dumps(results))
            return
        for slug, d in results.items():
            self.stdout.write(f"{slug}: threshold {d['threshold']:.4f} (off-topic questions refused "
                              f"{d['off_topic_refused']:.0%}, book's own probes refused {d['probes_refused']:.0%}, "
                              f"{d['seconds']:.1f} s)")
