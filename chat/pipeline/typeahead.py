"""Finding sections as a reader types: the book's search box (``GET /api/v1/search``, the widget's search mode and
the chat page's search form), from the same index and retrieval as the answers.

A query is read as typed: every word but the last is whole, and the last may be half-written, so it also stands
for the book's words that begin with it (``PREFIX_WORDS`` of them, the most widespread first, from the book's
lexicon, ``ingestion_lexemecount``): "ros2 lau" searches "ros2", "lau" and "launch". The whole words and those
expansions go to the lexical side of the hybrid search (which reads at most ``SCAN_BUDGET`` passages); the query
is embedded for the dense side, so a query whose words the book never uses still finds what is nearest in meaning
(``matched: "meaning"``), without a last word still being typed (the embedder would read "lau" as something else
than "launch"; ``read_typed`` says when a word counts as typed). Query vectors are kept in a small LRU
(``VECTOR_CACHE``): while the last word is typed ("ros2 la", "ros2 lau") the words before it are embedded once.

Results are sections grouped by page, best first (the pages in the order of their best section), each with
its URL and anchor and a snippet of its text around the words matched, the matches marked twice: as offsets
into the plain snippet and as HTML with ``<mark>`` (the snippet escaped, nothing else of the book's markup).
Every search is audited as the MCP search is: status ``searched``, the query and the sections returned.

Decided: no typo tolerance beyond what stemming gives (Postgres has no trigram index here, and a fuzzy match
on every keystroke costs more than the 50 ms a keystroke allows); a typo'd word still finds by meaning.
"""

from __future__ import annotations

import html
import re
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from django.db import connection

from chat.pipeline.announcements import AuditRecord, Outcome, audited_source, send_audit
from chat.pipeline.calibration import check_scope
from chat.pipeline.deadline import Deadline
from chat.pipeline.editions import resolve_book
from chat.pipeline.questions import AskRequest
from chat.pipeline.retrieval import Retrieval, RetrievedChunk, retrieve
from chat.pipeline.terms import plain_text
from ingestion.indexing.embedders import get_embedder
from ingestion.indexing.lexicon import query_terms
from ingestion.models import Book

PREFIX_WORDS = 3  # the book's words a half-typed last word stands for (each is a query word: more drown the rest)
MIN_PREFIX = 3  # a shorter last word is only itself (two letters begin too many words to say anything)
SECTIONS_SEARCHED = 5  # passages retrieved as for an answer; the whole ranked pool is then grouped into pages
SECTIONS_PER_PAGE = 3
MORE_SECTIONS_FROM = 10  # a page's second and third sections come from the best ten passages, not the pool's tail
DEFAULT_PAGES = 5
SNIPPET_CHARS = 180
VECTOR_CACHE = 256
# Passages the lexical scan may read for a search (an answer's may read 2,000): a half-typed word's expansions are
# the book's commonest words that begin with it, and the rarest words of a query select its candidates anyway.
SCAN_BUDGET = 400
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_LAST_WORD = re.compile(r"[^\W_]+\W*$", re.UNICODE)


@dataclass
class TypedQuery:
    text: str  # as typed
    lexical: str  # what the lexical search reads: the query, then the last word's expansions
    meaning: str  # what is embedded: the query without a half-typed last word the book doesn't have
    marks: tuple[str, ...]  # what a snippet marks: the query's stems and words, and the expansions


def read_typed(cursor, book_id: int, text: str) -> TypedQuery:
    """``text`` as a reader types it: its last word also stands for the book's words that begin with it."""
    tokens = [t.lower() for t in _TOKEN.findall(text)]
    stems = list(query_terms(cursor, book_id, text))
    expansions: list[str] = []
    last = tokens[-1] if tokens else ""  # the question comes stripped (the serializer), so never "ros2 lau "
    commonest = 0  # the passages that hold the last word's most widespread expansion
    if len(last) >= MIN_PREFIX:
        pattern = last.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        cursor.execute("SELECT lexeme, chunks FROM ingestion_lexemecount WHERE book_id = %s AND lexeme LIKE %s "
                       "AND lexeme <> ALL(%s::text[]) ORDER BY chunks DESC, lexeme LIMIT %s",
                       [book_id, pattern, stems, PREFIX_WORDS])
        found = cursor.fetchall()
        expansions, commonest = [row[0] for row in found], max((row[1] for row in found), default=0)
    # Stop words make no stem, and are not marked ("do" would mark "docs").
    marks = tuple(dict.fromkeys(m for m in (*stems, *expansions, last) if len(m) >= 2))
    # A word still being typed means nothing to the embedder ("lau" is not "launch"): the meaning is read from the
    # words before it, which stay the same while it is typed, so their vector comes from the cache
    # (``query_vector``). The last word counts as still being typed when it is shorter than ``MIN_PREFIX``, when
    # the book lacks it, or when the book has a word that begins with it in more passages ("cat" while "category"
    # is typed); it is embedded once it stands alone.
    meaning = text
    if last and len(tokens) > 1:
        own = len(last) >= MIN_PREFIX and max((n for n, _ in query_terms(cursor, book_id, last).values()), default=0)
        if not own or commonest > own:
            meaning = _LAST_WORD.sub("", text).strip() or text
    return TypedQuery(text, " ".join([text, *expansions]), meaning, marks)


_vectors: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
_vectors_lock = threading.Lock()


def query_vector(text: str):
    """The embedder's vector for ``text``, from the LRU of recent queries when it is there."""
    embedder = get_embedder()
    key = (embedder.name, text)
    with _vectors_lock:
        if key in _vectors:
            _vectors.move_to_end(key)
            return _vectors[key]
    vector = embedder.embed_query(text)
    with _vectors_lock:
        _vectors[key] = vector
        while len(_vectors) > VECTOR_CACHE:
            _vectors.popitem(last=False)
    return vector


def snippet(text: str, marks: tuple[str, ...]) -> tuple[str, list[list[int]]]:
    """A stretch of ``text`` (plain) around its first marked word, and the ``[start, end)`` offsets of every
    marked word in it: a word is marked when it begins with one of ``marks`` (a stem, a word or an expansion)."""
    plain = plain_text(text)
    found = [m.span() for m in _TOKEN.finditer(plain) if m.group().lower().startswith(marks)] if marks else []
    start = 0
    if found and found[0][0] > SNIPPET_CHARS // 3:
        start = plain.rfind(" ", 0, found[0][0] - SNIPPET_CHARS // 4) + 1
    end = len(plain) if len(plain) - start <= SNIPPET_CHARS else plain.rfind(" ", start, start + SNIPPET_CHARS)
    end = end if end > start else min(len(plain), start + SNIPPET_CHARS)
    prefix, suffix = ("…" if start else ""), ("…" if end < len(plain) else "")
    shift = len(prefix) - start
    offsets = [[s + shift, e + shift] for s, e in found if s >= start and e <= end]
    return f"{prefix}{plain[start:end]}{suffix}", offsets


def marked_html(text: str, offsets: list[list[int]]) -> str:
    """``text`` escaped, the words at ``offsets`` in ``<mark>``."""
    out, last = [], 0
    for start, end in offsets:
        out += [html.escape(text[last:start]), f"<mark>{html.escape(text[start:end])}</mark>"]
        last = end
    return "".join([*out, html.escape(text[last:])])


def section(chunk: RetrievedChunk, marks: tuple[str, ...]) -> dict:
    text, offsets = snippet(chunk.text, marks)
    return {"title": chunk.section, "heading_path": chunk.heading_path, "url": chunk.url, "snippet": text,
            "snippet_html": marked_html(text, offsets), "marks": offsets, "score": round(chunk.score, 4),
            "chunk_id": chunk.id}


def typed_search(book: Book, text: str, *, chapter: str | None = None,
                 deadline: Deadline | None = None) -> tuple[Retrieval, TypedQuery]:
    """The retrieval of ``text`` as typed in ``book``: whole words and the last word's expansions lexically, the
    text as typed by meaning."""
    with connection.cursor() as cursor:
        typed = read_typed(cursor, book.pk, text)
    retrieval = retrieve(book=book, question=typed.lexical, chapter=chapter, top_k=SECTIONS_SEARCHED,
                         deadline=deadline, query_vector=query_vector(typed.meaning), scan_budget=SCAN_BUDGET)
    return retrieval, typed


def by_page(chunks: list[RetrievedChunk], pages: int = DEFAULT_PAGES) -> list[list[RetrievedChunk]]:
    """The best ``pages`` pages, in the order of their best section, each with that section and the page's other
    sections among the best ``MORE_SECTIONS_FROM`` passages (``SECTIONS_PER_PAGE`` in all, each by its best
    passage): what a reader is shown."""
    found: dict[int, list[RetrievedChunk]] = {}
    for rank, chunk in enumerate(chunks):
        sections = found.get(chunk.document_id)
        if sections is None:
            if len(found) < pages:
                found[chunk.document_id] = [chunk]
        elif (rank < MORE_SECTIONS_FROM and len(sections) < SECTIONS_PER_PAGE
              and all(s.anchor != chunk.anchor for s in sections)):
            sections.append(chunk)  # (a long section's second passage is the same link: shown once)
    return list(found.values())


def find_sections(request: AskRequest) -> dict:
    """The sections of ``request.book`` that best match ``request.question`` as typed, grouped by page
    (``max_results`` pages, default ``DEFAULT_PAGES``)."""
    deadline = Deadline()
    book = resolve_book(request.book, version=request.version, locale=request.locale)
    retrieval, typed = typed_search(book, request.question, chapter=request.chapter, deadline=deadline)
    pages = [{"title": first.document_title, "chapter": first.chapter, "document": first.document_path,
              "url": first.url.split("#")[0], "sections": [section(chunk, typed.marks) for chunk in chunks]}
             for chunks in by_page(retrieval.pool, request.max_results or DEFAULT_PAGES) for first in chunks[:1]]
    for n, found in enumerate((s for page in pages for s in page["sections"]), 1):
        found["n"] = n  # its place in the result: what a report of the section opened names
    matched = "words" if any(s["marks"] for page in pages for s in page["sections"]) else (
        "meaning" if pages else "none")
    covered = check_scope(book, retrieval).covered
    search_id = uuid.uuid4()
    result = {"book": book.root.slug, "version": book.version, "locale": book.locale, "query": request.question,
              "matched": matched, "covered": covered, "pages": pages, "search_id": search_id}
    sources = [audited_source({**s, "document": page["document"], "chapter": page["chapter"], "section": s["title"],
                               "cited": False}) for page in pages for s in page["sections"]]
    send_audit(AuditRecord.of(
        request, outcome=Outcome.SEARCHED, answer_id=search_id, book_slug=book.slug,
        resolved_question=typed.lexical, sources=sources,
        retrieval={"best_cosine": round(retrieval.best_cosine, 4), "covered": covered, "matched": matched,
                   "candidates": retrieval.candidates, "reports_opens": request.report_opens},
        latency_ms=deadline.elapsed_ms(), timings_ms={"retrieval": round(retrieval.seconds * 1000, 2),
                                                      **retrieval.timings_ms}))
    return result
