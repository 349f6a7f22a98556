"""Searching a book for passages without composing an answer: what an AI assistant quotes and links (the MCP tool
``search_book``, ``chat.channels.mcp_server``).

The same book resolution, retrieval and scope decision as answering (``editions``, ``retrieval``:
hybrid search, then the re-ranker), the top ``limit`` passages as they are stored, each with its section URL,
and whether the book covers the query (``covered``, ``calibration.check_scope``), so that the assistant
can say when the book doesn't cover something instead of quoting the nearest unrelated passage. Every search is
audited as a lighter row than an answer: status ``searched``, the query and the passages returned, no answer.
"""

from __future__ import annotations

import uuid
from urllib.parse import quote

from chat.pipeline.announcements import AuditRecord, Outcome, audited_source, send_audit
from chat.pipeline.calibration import check_scope
from chat.pipeline.deadline import Deadline
from chat.pipeline.editions import resolve_book
from chat.pipeline.language import book_language, detect
from chat.pipeline.questions import AskRequest
from chat.pipeline.retrieval import RetrievedChunk, retrieve
from ingestion.models import Book

RESOURCE_SCHEME = "bookchat"


def page_uri(book_slug: str, path: str) -> str:
    """The MCP resource that holds a whole page of a book (``chat.channels.mcp_server``)."""
    return f"{RESOURCE_SCHEME}://{book_slug}/{quote(path, safe='/')}"


def search_passages(request: AskRequest) -> dict:
    """The passages of ``request.book`` that best match ``request.question`` (``max_results`` of them), best first."""
    deadline = Deadline()
    book = resolve_book(request.book, version=request.version, locale=request.locale)
    # An assistant may search in the reader's language: searched and judged in scope as the ask path does.
    written_in = book_language(book)
    language = detect(request.question, hint=written_in)
    retrieval = retrieve(book=book, question=request.question, top_k=request.max_results, deadline=deadline,
                         language=language)
    covered = check_scope(book, retrieval, crosslingual=language != written_in).covered
    passages = [passage(n, chunk, book) for n, chunk in enumerate(retrieval.chunks, 1)]
    result = {"book": book.root.slug, "version": book.version, "locale": book.locale, "query": request.question,
              "covered": covered, "passages": passages}
    send_audit(AuditRecord.of(
        request, outcome=Outcome.SEARCHED, answer_id=uuid.uuid4(), book_slug=book.slug,
        resolved_question=retrieval.query, sources=[audited_source({**p, "cited": False}) for p in passages],
        retrieval={"best_cosine": round(retrieval.best_cosine, 4), "covered": covered,
                   "candidates": retrieval.candidates},
        latency_ms=deadline.elapsed_ms(), timings_ms={"retrieval": round(retrieval.seconds * 1000, 2),
                                                      **retrieval.timings_ms}))
    return result


def passage(n: int, chunk: RetrievedChunk, book: Book) -> dict:
    return {"n": n, "text": chunk.text, "heading_path": chunk.heading_path, "page_title": chunk.document_title,
            "chapter": chunk.chapter, "section": chunk.section, "url": chunk.url, "score": round(chunk.score, 4),
            "chunk_id": chunk.id, "document": chunk.document_path, "page": page_uri(book.slug, chunk.document_path)}
