"""What an indexing run reports: per book (``IndexReport``), and for a site, per edition with their sums
(``SiteReport``); ``ingest`` prints them, upload jobs store them, ``bootstrap`` reads them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bookchat.base.errors import BookchatError
from ingestion.reading.documents import Issue

if TYPE_CHECKING:
    from ingestion.reading.site import Edition


# Pages listed by name in a report for each kind of change (the counts are always whole).
LISTED_PAGES = 500


class IndexingError(BookchatError):
    code = "indexing_failed"


@dataclass
class IndexReport:
    book: str
    dry_run: bool = False
    files_seen: int = 0
    files_indexed: int = 0  # added or changed
    files_added: int = 0
    files_unchanged: int = 0
    files_failed: int = 0
    files_skipped: int = 0
    documents_removed: int = 0
    chunks_added: int = 0
    chunks_kept: int = 0
    chunks_removed: int = 0
    chunks_embedded: int = 0
    tokens: int = 0
    embed_seconds: float = 0.0
    total_seconds: float = 0.0
    errors: list[dict] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)
    # What the apps listening to ``book_indexed`` did after the run, by name (chat: "sentence_vectors").
    after: dict[str, dict] = field(default_factory=dict)
    # The paths of the pages added, changed and removed (a dry run: that would be), at most ``LISTED_PAGES`` each.
    pages: dict[str, list[str]] = field(default_factory=lambda: {"added": [], "changed": [], "removed": []})
    pages_folder: str = ""  # the folder the pages' paths are relative to

    def page_changed(self, change: str, path: str) -> None:
        if len(self.pages[change]) < LISTED_PAGES:
            self.pages[change].append(path)

    def error(self, issue: Issue | BookchatError) -> None:
        self.errors.append(issue.as_dict())

    def warn(self, issue: Issue) -> None:
        self.warnings.append(issue.as_dict())

    @property
    def exit_code(self) -> int:
        """0: everything indexed; 1: some files failed, the rest are searchable; 2: nothing could be indexed."""
        if not self.files_failed:
            return 0
        return 1 if self.files_indexed + self.files_unchanged else 2

    def as_dict(self) -> dict:
        data = dict(self.__dict__)
        data["embed_seconds"] = round(self.embed_seconds, 3)
        data["total_seconds"] = round(self.total_seconds, 3)
        return data


ProgressCallback = Callable[[str, int, int], None]  # (stage, done, total)
# Told, once per book indexed, the id of the IndexRun that records the run, as soon as that record is committed:
# (book slug, run id). An upload job links itself to its run with it.
RunCallback = Callable[[str, int], None]


@dataclass
class SiteReport:
    """The index reports of a site's editions, and their sums (the fields of ``IndexReport``)."""

    total: IndexReport
    site: dict
    editions: list[tuple[Edition, IndexReport]] = field(default_factory=list)

    def __getattr__(self, name: str):
        return getattr(self.total, name)

    @property
    def site_warnings(self) -> list[dict]:
        """The warnings about the site itself (its config, versions file, folders)."""
        return [w for w in self.total.warnings if "book" not in w]

    def as_dict(self) -> dict:
        return {**self.total.as_dict(), "site": self.site, "books": [
            {"slug": e.slug, "title": e.title, "base_url": e.base_url, "version": e.version,
             "version_label": e.version_label, "latest": e.latest, "locale": e.locale,
             **{k: v for k, v in r.as_dict().items() if k not in ("book", "dry_run")}}
            for e, r in self.editions
        ]}


SUMMED = ("files_seen", "files_indexed", "files_added", "files_unchanged", "files_failed", "files_skipped",
          "documents_removed", "chunks_added", "chunks_kept", "chunks_removed", "chunks_embedded", "tokens",
          "embed_seconds")
