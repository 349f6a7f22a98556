"""``manage.py ingest PATH``: index a Docusaurus site, a folder or one file of Markdown/MDX pages into a book.

A folder holding ``docusaurus.config.*`` is read as a site (``ingestion.reading.site``): every docs instance,
version and locale, with the site's title and URLs; ``--json`` then adds ``site`` and ``books`` (one
report per edition) to the summed report.

Exit status: 0 when every file was indexed, 1 when some failed (the rest are indexed and
searchable), 2 when nothing could be indexed or the arguments are wrong.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError
from bookchat.base.models import StaffCommand
from ingestion.indexing.ingesting import index_path
from ingestion.indexing.reports import IndexReport, SiteReport
from ingestion.languages import language_tag
from ingestion.models import DefaultBook


class ProgressBar:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, stream):
        self.stream = stream
        self.enabled = stream.isatty()
        self.files = (0, 0)
        self.embedded = (0, 0)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        if stage == "files":
            self.files = (done, total)
        else:
            self.embedded = (done, total)
        done_files, total_files = self.files
        width = 30
        filled = int(width * done_files / total_files) if total_files else width
        line = f"\r[{'#' * filled}{'.' * (width - filled)}] {done_files}/{total_files} files"
        if self.embedded[1]:
            line += f", embedding {self.embedded[0]}/{self.embedded[1]} passages"
        self.stream.write(line.ljust(78))
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 78 + "\r")
            self.stream.flush()


class Command(BaseCommand):
    help = "Index a folder (or a single file) of Markdown/MDX pages into a book."
    requires_system_checks = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="A Docusaurus site (the folder with docusaurus.config.*), a docs folder "
                                         "or a single .md/.mdx file.")
        parser.add_argument("--book", dest="book", help="Book slug (default: the folder's name, slugified).")
        parser.add_argument("--title", help="Book title (default: the site's title, else the folder's index page "
                                            "or README, else its name).")
        parser.add_argument("--base-url", dest="base_url",
                            help="Public URL of the book, used to build links to sections (for a site: its url "
                                 "and baseUrl, default from its config).")
        parser.add_argument("--language", help="What the pages are written in, a BCP 47 tag (en, es, zh, pt-BR): it "
                            "picks the book's text search (default: the config's theme.language or book.toml's "
                            "language, a Docusaurus locale's own, else the book's stored language, else en).")
        parser.add_argument("--prune", action="store_true", help="Remove pages whose files are gone.")
        parser.add_argument("--dry-run", action="store_true",
                            help="Report what would change without embedding or writing anything.")
        parser.add_argument("--reindex", action="store_true",
                            help="Drop the book's passages and embed everything again (after changing embedder).")
        parser.add_argument("--default", action="store_true", help="Make this book the default book, the one asked "
                            "when a request names none (stored: every process reads it).")
        parser.add_argument("--json", action="store_true", help="Print the index report as one JSON object.")

    def handle(self, *args, **options) -> None:
        progress = ProgressBar(sys.stderr) if not options["json"] else None
        path = Path(options["path"]).expanduser()
        arguments = {"book_slug": options["book"], "base_url": options["base_url"], "title": options["title"],
                     "prune": options["prune"], "dry_run": options["dry_run"], "reindex": options["reindex"],
                     "progress": progress}
        try:
            if options["language"] is not None:
                arguments["language"] = language_tag(options["language"])
            report = index_path(path, **arguments)
        except BookchatError as exc:
            if progress:
                progress.close()
            self._fail(exc, as_json=options["json"])
        if progress:
            progress.close()
        made_default = options["default"] and self._make_default(report)
        if options["json"]:
            self.stdout.write(json.dumps(report.as_dict() | ({"default_book": report.book} if made_default else {}),
                                         ensure_ascii=False))
        else:
            self.stdout.write(summary(report))
            if made_default:
                self.stdout.write(f"{report.book!r} is the default book.")
        if report.exit_code:
            sys.exit(report.exit_code)

    def _make_default(self, report: IndexReport | SiteReport) -> bool:
        """``--default``: store the book as the default, when it has pages to answer from (the warning on stderr,
        the run's exit code unchanged)."""
        if report.dry_run:
            self.stderr.write("--dry-run: the default book is left as it was.")
            return False
        if not report.files_indexed + report.files_unchanged:
            self.stderr.write(f"--default: no page of {report.book!r} could be indexed; the default book is left "
                              "as it was.")
            return False
        DefaultBook.choose(report.book, by="ingest --default")
        StaffCommand.record(f"ingest --default --book {report.book}", "default book set", report.book)
        if setting("DEFAULT_BOOK") and setting("DEFAULT_BOOK") != report.book:
            self.stderr.write(f"Warning: BOOKCHAT_DEFAULT_BOOK={setting('DEFAULT_BOOK')} is set here and wins over "
                              f"the stored default {report.book!r} in every process that has it.")
        return True

    def _fail(self, exc: BookchatError, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps({"error": exc.code, "message": exc.message,
                                          "errors": [exc.as_dict()], "warnings": []}))
        else:
            self.stderr.write(f"ingest: {exc}")
        sys.exit(2)


def summary(r: IndexReport | SiteReport) -> str:
    """A run's report as people read it: counts, what followed the run, then each error and warning (a site:
    one block per edition)."""
    if isinstance(r, SiteReport):
        lines = [f"Site {r.site['title']!r} ({r.site['config']}, read with {r.site['read_with']}): "
                 f"{len(r.editions)} editions, {r.chunks_embedded} passages embedded, "
                 f"total {r.total_seconds:.1f} s."]
        for edition, report in r.editions:
            where = " · ".join(x for x in (edition.version_label, edition.locale) if x)
            lines.append(f"- {edition.slug} ({where}) at {edition.base_url}")
            lines.append("  " + summary(report).replace("\n", "\n  "))
        for item in r.site_warnings:
            lines.append(f"Warning: {item['file'] or '-'}: {item['message']}")
        return "\n".join(lines)
    verb = "would index" if r.dry_run else "indexed"
    lines = [
        f"Book {r.book!r}: {r.files_seen} files seen, {r.files_indexed} {verb}, {r.files_unchanged} unchanged, "
        f"{r.files_skipped} skipped, {r.files_failed} failed.",
        f"Passages: {r.chunks_added} added, {r.chunks_kept} kept, {r.chunks_removed} removed, "
        f"{r.chunks_embedded} embedded ({r.tokens} tokens, {r.embed_seconds:.1f} s); "
        f"total {r.total_seconds:.1f} s.",
    ]
    if r.documents_removed:
        lines.append(f"Pages removed: {r.documents_removed}.")
    if (sentences := r.after.get("sentence_vectors")) and sentences.get("passages"):
        lines.append(f"Sentence vectors: {sentences['passages']} passages made ({sentences['reused']} shared with "
                     f"equal passages), {sentences['units_embedded']} sentences embedded in "
                     f"{sentences['seconds']:.1f} s.")
    if (calibration := r.after.get("calibration")) and "threshold" in calibration:
        lines.append(f"Calibration: questions scoring below {calibration['threshold']:.3f} are not covered (this "
                     f"refuses {calibration['off_topic_refused']:.0%} of the off-topic probes and "
                     f"{calibration['probes_refused'] or 0:.0%} of the book's own); the answerability check is "
                     f"{'on' if calibration['answerability'] else 'off'} for this book.")
    for title, items in (("Errors", r.errors), ("Warnings", r.warnings)):
        if items:
            lines.append(f"{title}:")
            for item in items:
                where = item["file"] or "-"
                if item["line"]:
                    where += f":{item['line']}"
                lines.append(f"  {where}: {item['message']}")
    return "\n".join(lines)
