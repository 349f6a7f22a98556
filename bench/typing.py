"""Search as a reader types: the shared questions replayed keystroke by keystroke against ``GET /api/v1/search``.

Each answerable question becomes what a reader types into a search box: its content words (the ones the book's
search keeps; "How do I" are stop words), three of them, the third cut to a prefix
(``chat.quality.search_evaluation``); every keystroke from the second character on is one search, sent as soon
as the previous one is answered (no debouncing: the worst case a browser could send). Reported: the p50/p95 of
every keystroke, and of the three-word prefixes alone (issue 35's target: p95 ≤ 50 ms on docusaurus-docs, over
HTTP; ≤ 80 ms in-process at 50k passages, ``at_scale`` and ``scaled``).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from bench import scale
from bench.latency import Gunicorn, warm_up
from bench.stats import summary
from chat.pipeline.editions import resolve_book
from chat.pipeline.typeahead import typed_search
from chat.quality.evaluation import load_questions
from chat.quality.search_evaluation import content_words, typed_prefix
from ingestion.models import Book

FILES = ("questions.jsonl", "questions-2.jsonl")
FRESH_CONNECTIONS = httpx.Limits(max_keepalive_connections=0)
MIN_TYPED = 2


def keystrokes(texts: list[str]) -> list[tuple[str, bool]]:
    """Every prefix of each text from ``MIN_TYPED`` characters on, with whether it is the whole text."""
    return [(text[:end], end == len(text)) for text in texts for end in range(MIN_TYPED, len(text) + 1)
            if text[:end].strip()]


def typed_queries(data: Path, book_slug: str, *, files=FILES, source: str | None = None) -> list[str]:
    """The three-word prefixes of the content words of each answerable question of ``files``, read against
    ``source`` (default: the book itself; a synthetic book reads its questions' book)."""
    book = resolve_book(source or book_slug)
    out = []
    for name in files:
        path = data / (source or book_slug) / name
        if path.is_file():
            out += [typed_prefix(content_words(q.question, book.pk) or q.question) for q in load_questions(path)
                    if q.kind == "answerable"]
    return [text for text in out if text]


def over_http(data: Path, book: str, *, log) -> dict:
    """The replay against gunicorn (2 workers, as ``make run``), no rate limit."""
    strokes = keystrokes(typed_queries(data, book))
    every, final, errors = [], [], 0
    with Gunicorn(workers=2, env={"BOOKCHAT_RATE_SEARCH": ""}) as server:
        warm_up(server, [(text, book) for text, _ in strokes[:8]])
        log(f"  {len(strokes)} keystrokes of {sum(last for _, last in strokes)} typed queries …")
        # A connection per search, as a browser's several connections let a keystroke's search go while the last
        # one's connection is still busy: the audit row is written after the response, on the request's thread,
        # so one kept-alive connection would add every previous search's write to the next one's time.
        with httpx.Client(base_url=server.url, timeout=30, limits=FRESH_CONNECTIONS) as client:
            for text, last in strokes:
                started = time.perf_counter()
                response = client.get("/api/v1/search", params={"q": text, "book": book})
                elapsed = (time.perf_counter() - started) * 1000
                errors += response.status_code != 200
                every.append(elapsed)
                if last:
                    final.append(elapsed)
    return {"book": book, "keystrokes": summary(every), "typed_queries": summary(final), "errors": errors}


def at_scale(book: Book, texts: list[str]) -> dict:
    """In-process search time of the three-word prefixes on ``book`` (a synthetic big book)."""
    latencies = []
    for text in texts:
        started = time.perf_counter()
        typed_search(book, text)
        latencies.append((time.perf_counter() - started) * 1000)
    return summary(latencies)


def scaled(data: Path, sizes=(1000, 50_000), *, questions: int = 200, log) -> list[dict]:
    """``at_scale`` on synthetic books of each size (``bench.scale``: squad2-dev's pages and real filler), with
    squad2-dev's typed queries; each book is deleted afterwards."""
    texts = typed_queries(data, "squad2-dev")[:questions]
    out = []
    for size in sizes:
        book = scale.build_book(size, log=log)
        try:
            scale.hnsw_build_seconds(book)
            at_scale(book, texts[:20])  # the first searches of a new book warm its indexes: not timed
            out.append({"size": size, **at_scale(book, texts)})
        finally:
            Book.objects.filter(slug=book.slug).delete()
    return out


def describe(figures: dict) -> str:
    every, final = figures["keystrokes"], figures["typed_queries"]
    return (f"search on {figures['book']}: {every['n']} keystrokes p50 {every['p50']:.1f} / p95 {every['p95']:.1f} ms; "
            f"the {final['n']} three-word prefixes p50 {final['p50']:.1f} / p95 {final['p95']:.1f} ms; "
            f"{figures['errors']} errors")
