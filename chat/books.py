"""The books as clients list them: ``GET /api/v1/books`` and ``/books/{slug}`` (``chat.api``) and an assistant's
``list_books`` tool and page resources (``chat.mcp_server``)."""

from __future__ import annotations

from django.db.models import Q

from chat.answering import scope_threshold
from chat.models import ScopeCalibration
from ingestion.models import Book
from ingestion.outline import book_outline


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
