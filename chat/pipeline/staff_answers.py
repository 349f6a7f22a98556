"""The course staff's answers (``chat.models.StaffAnswer``): the sections they cite, and keeping one.

A staff answer cites *sections* of the book, as a reviewer picks them from its outline or names them by URL: a
section is a page's passages under one heading (``Chunk.heading_path`` of one ``Document``). ``cite`` resolves what
a reviewer picked (a passage's id, as the section search gives it, or the section's URL) to citations, each shaped
as an answer's source card (``source_cards.Source``: the reader sees a staff answer's citations as they see any
answer's sources) plus the section's ``anchor`` and its ``text`` when it was cited, which the book's later
indexing runs compare with (a cited section removed or rewritten sends its staff answer to review). Anything that
is not a section of the book is refused with the reason (``RequestError``, code ``not_a_section``).

``keep`` stores a staff answer with its question's vector (the book's embedder, the vector that matching compares
a later question's with).
"""

from __future__ import annotations

import dataclasses

from django.db import transaction
from django.utils import timezone

from bookchat.base.errors import RequestError
from chat.models import StaffAnswer
from chat.pipeline.source_cards import EXCERPT_CHARS, Source
from chat.pipeline.terms import plain_text
from ingestion.indexing.embedders import get_embedder
from ingestion.models import Book, Chunk

MAX_CITATIONS = 10
MAX_ANSWER_CHARS = 20_000


def section_text(book: Book, document_path: str, heading_path: str) -> str:
    """The text of one section as the book stores it now ("" when the book no longer has it): its passages, in
    order."""
    texts = Chunk.objects.filter(book=book, document__path=document_path, heading_path=heading_path,
                                 ).order_by("ordinal").values_list("text", flat=True)
    return "\n\n".join(texts)


def cite(book: Book, refs: list[str]) -> list[dict]:
    """The citations ``refs`` name, numbered in their order: each a passage id or a section's URL of ``book`` (its
    root: the book as students read it). A ref twice is cited once."""
    if len(refs) > MAX_CITATIONS:
        raise RequestError(f"cite at most {MAX_CITATIONS} sections", code="too_many_citations", field="citations")
    citations: list[dict] = []
    seen: set[tuple[str, str]] = set()
    for ref in refs:
        chunk = _section_chunk(book.root, str(ref).strip())
        key = (chunk.document.path, chunk.heading_path)
        if key in seen:
            continue
        seen.add(key)
        citations.append(_citation(len(citations) + 1, chunk, section_text(book.root, *key)))
    return citations


def _section_chunk(book: Book, ref: str) -> Chunk:
    """The first passage of the section ``ref`` names, or the refusal that says why it names none."""
    chunks = Chunk.objects.filter(book=book).select_related("document").order_by("document__path", "ordinal")
    chunk = None
    if ref:
        chunk = chunks.filter(id=ref).first()
        if chunk is None:
            url, _, anchor = ref.partition("#")
            anchor = anchor.split(":~:", 1)[0]
            chunk = chunks.filter(url=ref).first() or (
                chunks.filter(document__url=url, anchor=anchor).first() if url else None)
    if chunk is None:
        raise RequestError(f"{ref[:200]!r} is not a section of “{book.title}”: pick one from the book's outline "
                           "(its search), or give a section's URL as the book's site shows it",
                           code="not_a_section", field="citations")
    first = chunks.filter(document=chunk.document, heading_path=chunk.heading_path).first()
    return first or chunk


def _citation(n: int, chunk: Chunk, text: str) -> dict:
    plain = plain_text(text)
    excerpt = plain[:EXCERPT_CHARS]
    if len(plain) > EXCERPT_CHARS:
        excerpt = excerpt.rsplit(" ", 1)[0] + " …"
    document = chunk.document
    section = chunk.heading_path.rsplit(" > ", 1)[-1] if chunk.heading_path else document.title
    card = Source(n=n, chapter=document.category or document.title, section=section,
                  heading_path=chunk.heading_path, url=chunk.url, excerpt=excerpt, score=1.0, chunk_id=chunk.id,
                  cited=True, document=document.path)
    return {**dataclasses.asdict(card), "anchor": chunk.anchor, "text": text}


def cards(citations: list[dict]) -> list[Source]:
    """Citations as the source cards an answer shows (what ``cite`` adds for later comparison left out)."""
    names = {f.name for f in dataclasses.fields(Source)}
    return [Source(**{k: v for k, v in citation.items() if k in names}) for citation in citations]


def check_answer(answer: str, citations: list[dict]) -> str:
    """The staff's answer, stripped, or the refusal that says what is wrong with it."""
    answer = (answer or "").strip()
    if not answer:
        raise RequestError("write the answer", code="empty_answer", field="answer")
    if len(answer) > MAX_ANSWER_CHARS:
        raise RequestError(f"the answer is {len(answer):,} characters; at most {MAX_ANSWER_CHARS:,}",
                           code="answer_too_long", field="answer")
    return answer


@transaction.atomic
def keep(*, book: Book, question: str, answer: str, citations: list[dict], user=None) -> StaffAnswer:
    """Store a staff answer of ``book`` (its root) to ``question``, with the question's vector for matching."""
    embedder = get_embedder()
    vector = embedder.embed_query(question)
    return StaffAnswer.objects.create(book=book.root, question=question.strip(), answer=check_answer(answer, citations),
                                      citations=citations, question_vector=list(map(float, vector)),
                                      embedder=embedder.name, answered_at=timezone.now(),
                                      created_by=user if user is not None and user.is_authenticated else None)
