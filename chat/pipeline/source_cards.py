"""A response's sources: each passage as the reader sees it (a ``Source``), with an excerpt and a link that
highlights it.

The excerpt starts at the sentence the answer quotes (when it quotes one) and runs about
``EXCERPT_CHARS`` of plain text; the link adds a text fragment (``#:~:text=``) so the browser
scrolls to and highlights the excerpt's first words on the book's page.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from chat.pipeline.retrieval import RetrievedChunk
from chat.pipeline.terms import plain_text, split_sentences, strip_citations

EXCERPT_CHARS = 300


@dataclass(frozen=True)
class Source:
    """One source of an answer (``chat.pipeline.answers.Answer.sources``), each field as the API sends it."""

    n: int  # the number the answer's ``[n]`` markers refer to
    chapter: str
    section: str
    heading_path: str
    url: str  # with a text fragment that highlights the excerpt
    excerpt: str
    score: float
    chunk_id: str
    cited: bool
    document: str  # the page's path in the book


def source_card(n: int, chunk: RetrievedChunk, answer: str, cited: bool) -> Source:
    """Source ``n`` of a response: where it is, the excerpt to show, whether the answer cites it."""
    excerpt = excerpt_for(chunk, answer)
    return Source(n=n, chapter=chunk.chapter, section=chunk.section, heading_path=chunk.heading_path,
                  url=fragment_url(chunk.url, excerpt), excerpt=excerpt, score=round(chunk.score, 4),
                  chunk_id=chunk.id, cited=cited, document=chunk.document_path)


def excerpt_for(chunk: RetrievedChunk, answer: str) -> str:
    """About EXCERPT_CHARS of the chunk as plain text, starting at the sentence the answer quotes, if any."""
    text = plain_text(chunk.text)
    start = 0
    for sentence in split_sentences(strip_citations(answer)):
        probe = plain_text(sentence)[:60]
        if len(probe) >= 20 and probe in text:
            start = text.index(probe)
            break
    excerpt = text[start:start + EXCERPT_CHARS]
    if start + EXCERPT_CHARS < len(text):
        excerpt = excerpt.rsplit(" ", 1)[0] + " …"
    return excerpt


def fragment_url(url: str, excerpt: str) -> str:
    """``url`` with a text fragment (``#anchor:~:text=…``) that highlights the excerpt's first words."""
    first = split_sentences(excerpt.replace(" …", ""))
    start_words = (first[0] if first else excerpt).split()[:6]
    if len(start_words) < 2:
        return url
    fragment = quote(" ".join(start_words).rstrip(".,;:"), safe="")
    fragment = fragment.replace("-", "%2D")
    return f"{url}:~:text={fragment}" if "#" in url else f"{url}#:~:text={fragment}"
