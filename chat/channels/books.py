"""The books as clients list them: ``GET /api/v1/books`` and ``/books/{slug}`` (``api``) and an assistant's
``list_books`` tool and page resources (``mcp_server``)."""

from __future__ import annotations

import re

from django.db.models import Q

from chat.models import ScopeCalibration
from chat.pipeline.calibration import scope_threshold
from ingestion.models import Book, Document
from ingestion.reading.outline import book_outline

_HEADING = re.compile(r"^#{1,6}\s+(.+?)(?:\s+\{#[^}]*\})?\s*$", re.MULTILINE)


def book_list(*, slug: str | None = None) -> list[dict]:
    """Every book (or only ``slug``) as ``book_entry`` describes it, by slug; a site's editions inside its book."""
    books = Book.objects.order_by("version_rank", "locale", "slug").with_counts()
    if slug is not None:
        books = books.filter(Q(slug=slug) | Q(edition_of__slug=slug))
    books = list(books)
    thresholds = dict(ScopeCalibration.objects.values_list("book_id", "threshold"))
    editions = {}
    for b in books:
        editions.setdefault(b.edition_of_id or b.pk, []).append(b)
    return [book_entry(b, editions[b.pk], thresholds) for b in sorted(books, key=lambda b: b.slug)
            if b.edition_of_id is None]


def book_entry(root: Book, editions: list[Book], thresholds: dict) -> dict:
    """A book as ``GET /books`` lists it: its root's figures, and its versions and locales when it has them."""
    latest = next((e for e in editions if e.latest and e.locale == root.locale), root)
    versioned = len({e.version for e in editions}) > 1
    return {
        "slug": root.slug, "title": root.title, "base_url": latest.base_url, "pages": latest.document_count,
        "chunks": latest.chunk_count, "embedder": root.embedder_name,
        "scope_threshold": round(scope_threshold(latest, {"threshold": thresholds.get(latest.pk)
                                                          or thresholds.get(root.pk)}), 4),
        "updated_at": max(e.updated_at for e in editions),
        "versions": list(dict.fromkeys(e.version for e in editions if e.version)) if versioned else [],
        "locales": list(dict.fromkeys(e.locale for e in sorted(editions, key=lambda e: e.locale != root.locale)
                                      if e.locale)),
        "chapters": list(dict.fromkeys(chapter["chapter"] for chapter in book_outline(latest))),
        "editions": [{"version": e.version if versioned else "", "label": e.version_label if versioned else "",
                      "path": e.version_path, "locale": e.locale, "latest": e.latest, "base_url": e.base_url,
                      "pages": e.document_count} for e in editions],
    }


def book_pages(*, slug: str | None = None, limit: int = 1000) -> list[Document]:
    """The pages of every book (or of ``slug`` and its editions), by book and path, at most ``limit``."""
    pages = Document.objects.select_related("book").order_by("book__slug", "path")
    if slug is not None:
        pages = pages.filter(Q(book__slug=slug) | Q(book__edition_of__slug=slug))
    return list(pages[:limit])


def page_markdown(document: Document) -> str:
    """A page as it was indexed: its passages in order, under their headings (the page's title as its H1), each
    overlap with the passage before it removed. The page's own file is not kept; its passages are what answers
    quote. A heading a passage already holds (small sections are indexed together) is not written twice."""
    lines: list[str] = []
    previous_path: list[str] = []
    previous_text = ""
    previous_held: set[str] = set()
    for heading_path, text in document.chunks.order_by("ordinal").values_list("heading_path", "text"):
        parts = [p for p in heading_path.split(" > ") if p]
        if len(parts) > 1 and parts[0] == document.category:
            parts = parts[1:]  # the chapter is the page's folder, not one of its headings
        parts = parts or [document.title]
        if parts == previous_path:
            text = text[_overlap(previous_text, text):].lstrip()
        held = {m.group(1).strip() for m in _HEADING.finditer(text)}
        for depth, part in enumerate(parts):
            if parts[:depth + 1] != previous_path[:depth + 1] and part not in held | previous_held:
                lines += [f"{'#' * min(depth + 1, 6)} {part}", ""]
        previous_held = held
        if text:
            lines += [text, ""]
            previous_text = text
        previous_path = parts
    return "\n".join(lines).strip() + "\n"


def _overlap(before: str, after: str, *, shortest: int = 20) -> int:
    """Length of the longest start of ``after`` that ``before`` ends with (0 when under ``shortest``)."""
    for size in range(min(len(before), len(after)), shortest - 1, -1):
        if before.endswith(after[:size]):
            return size
    return 0
