"""The sections a reviewer may cite, found as they type (the admin's citation picker on a hand-off and on a staff
answer): sections of the book whose headings hold the words typed, then those whose text answers them.

A section is a page's passages under one heading, as ``chat.pipeline.staff_answers.cite`` reads a citation. Two
searches, each for what the other misses: a reviewer who knows the book types a heading's words ("publish ci"), and
every word of the query, the last one possibly half-typed, must begin a word of the section's chapter, page title or
heading path; one who knows the question types its words, and the book's own search as a reader types
(``chat.pipeline.typeahead.typed_search``: the same hybrid retrieval, the last word's expansions) finds the sections
that answer it. Heading matches come first, in the book's order, then the text's, best first.

Decided: the reviewers' searches are not audited (``typed_search`` sends nothing; ``find_sections`` would record each
keystroke as a reader's search, and a search that finds nothing would join the coverage gaps).
"""

from __future__ import annotations

import logging
import re

from bookchat.base.errors import BookchatError
from chat.pipeline.typeahead import snippet, typed_search
from ingestion.models import Book, Chunk

logger = logging.getLogger(__name__)

MAX_QUERY_CHARS = 200
MIN_QUERY_CHARS = 2
DEFAULT_LIMIT = 8
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _sections(book: Book) -> list[dict]:
    """The book's sections in page and passage order, each with its first passage's id (what ``cite`` reads)."""
    seen: dict[tuple[str, str], dict] = {}
    rows = (Chunk.objects.filter(book=book).order_by("document__path", "ordinal")
            .values_list("id", "document__path", "document__title", "document__category", "heading_path", "url"))
    for chunk_id, path, title, chapter, heading_path, url in rows:
        seen.setdefault((path, heading_path), {"chunk_id": chunk_id, "page": title, "chapter": chapter or title,
                                               "heading_path": heading_path, "url": url, "document": path})
    return list(seen.values())


def _found(section: dict, how: str, excerpt: str = "") -> dict:
    return {"ref": section["url"] or section["chunk_id"], "url": section["url"], "chunk_id": section["chunk_id"],
            "heading_path": section["heading_path"] or section["page"], "page": section["page"],
            "chapter": section["chapter"], "matched": how, "snippet": excerpt}


def by_heading(sections: list[dict], words: list[str]) -> list[dict]:
    """The sections whose chapter, page title or heading path has a word beginning with each of ``words``, those
    whose own heading has most of them first (then in the book's order)."""
    found = []
    for place, section in enumerate(sections):
        haystack = _words(f"{section['chapter']} {section['page']} {section['heading_path']}")
        if all(any(word.startswith(w) for word in haystack) for w in words):
            own = _words(section["heading_path"].rsplit(" > ", 1)[-1] or section["page"])
            found.append((-sum(any(word.startswith(w) for word in own) for w in words), place, section))
    return [section for *_, section in sorted(found, key=lambda f: f[:2])]


def citable_sections(book: Book, text: str, *, limit: int = DEFAULT_LIMIT) -> list[dict]:
    """Up to ``limit`` sections of ``book`` (its root: the book as students read it) for ``text`` as typed: those
    whose headings hold its words, then those whose text answers it. Each: ``ref`` (what the citation field takes:
    the section's URL, else its passage id), ``url``, ``chunk_id``, ``heading_path``, ``page``, ``chapter``,
    ``matched`` ("heading" or "text") and a ``snippet`` of the text."""
    book = book.root
    text = " ".join(str(text).split())[:MAX_QUERY_CHARS]
    words = _words(text)
    if len(text) < MIN_QUERY_CHARS or not words:
        return []
    sections = _sections(book)
    found = [_found(s, "heading") for s in by_heading(sections, words)[:limit]]
    if len(found) < limit and sections:
        keys = {(f["url"], f["heading_path"]) for f in found}
        try:
            retrieval, typed = typed_search(book, text)
        except BookchatError as exc:  # a book its embedder can't search now: the headings still help
            logger.warning("searching %s for a citation failed: %s", book.slug, exc)
            return found
        for chunk in retrieval.pool:
            key = (chunk.url, chunk.heading_path or chunk.document_title)
            if key in keys:
                continue
            keys.add(key)
            section = {"chunk_id": chunk.id, "url": chunk.url, "heading_path": chunk.heading_path,
                       "page": chunk.document_title, "chapter": chunk.chapter}
            found.append(_found(section, "text", snippet(chunk.text, typed.marks)[0]))
            if len(found) >= limit:
                break
    return found
