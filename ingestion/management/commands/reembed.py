"""``manage.py reembed BOOK``: embed a book again from its stored passages with the configured embedder, when the
embedder changed and the book's sources are not at hand (``ingestion.indexing.reembedding``).

Exit status: 0 done, 2 the book is unknown, an edition, being indexed, or the embedder failed.
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandParser

from bookchat.base.errors import BookchatError
from ingestion.indexing.reembedding import reembed_book
from ingestion.management.commands.ingest import ProgressBar


class Command(BaseCommand):
    help = "Embed a book (and its editions) again from its stored passages, after changing the embedder."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("book", metavar="BOOK", help="The book's slug (`GET /api/v1/books` lists them).")
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")

    def handle(self, *args, **options) -> None:
        progress = ProgressBar(sys.stderr) if not options["json"] else None
        try:
            reports = reembed_book(options["book"], progress=progress)
        except BookchatError as exc:
            if progress:
                progress.close()
            if options["json"]:
                self.stdout.write(json.dumps({"error": exc.code, "message": exc.message}, ensure_ascii=False))
            else:
                self.stderr.write(f"reembed: {exc.message}")
            sys.exit(2)
        if progress:
            progress.close()
        if options["json"]:
            self.stdout.write(json.dumps({"books": [report.as_dict() for report in reports]}, ensure_ascii=False))
            return
        for report in reports:
            line = (f"Book {report.book!r}: {report.chunks_kept} passages embedded again from what was stored "
                    f"({report.chunks_embedded} new vectors, {report.embed_seconds:.1f} s); "
                    f"total {report.total_seconds:.1f} s.")
            if (calibration := report.after.get("calibration")) and "threshold" in calibration:
                line += f" Calibrated again: threshold {calibration['threshold']:.3f}."
            self.stdout.write(line)
