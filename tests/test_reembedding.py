"""``ingestion.indexing.reembedding``: which vectors a re-embedding makes — a stored vector of the same text by the
same embedder is shared, every other text embedded in batches, counted in the report — and the books it refuses
(unknown, or an edition: its root re-embeds it). tests/test_reembed.py runs ``manage.py reembed`` on a real book."""

from __future__ import annotations

import pytest

from ingestion.indexing.indexer import embedding_key
from ingestion.indexing.reembedding import _vectors, reembed_book
from ingestion.indexing.reports import IndexingError, IndexReport
from ingestion.models import Book, Chunk, Document

pytestmark = pytest.mark.django_db


class CountingEmbedder:
    """Three dimensions; a text's vector is its length; records what it was asked to embed."""

    name, dimension = "counting-test", 3

    def __init__(self):
        self.asked: list[list[str]] = []

    def embed_documents(self, texts: list[str], batch_size: int) -> list[list[float]]:
        self.asked.append(list(texts))
        return [[float(len(text)), 0.0, 0.0] for text in texts]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def _book(slug: str, **fields) -> Book:
    return Book.objects.create(slug=slug, title=slug.title(), embedder_name="old", embedder_dimension=3, **fields)


def test_a_stored_vector_of_the_same_text_is_shared_and_the_rest_embedded_in_batches(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "EMBED_BATCH_SIZE": 2}
    embedder = CountingEmbedder()
    stored_key = embedding_key(embedder.name, "Stored text")
    book = _book("reembed-shared")
    document = Document.objects.create(book=book, path="a.md", title="A")
    Chunk.objects.create(id="reembed-shared-0", book=book, document=document, ordinal=0, heading_path="A",
                         text="Stored text", char_start=0, char_end=11, line_start=1, line_end=1, token_count=2,
                         embedding_key=stored_key, dimensions=3, embedding=[0.0, 0.0, 1.0])
    texts = {stored_key: "Stored text", "k1": "one two", "k2": "three", "k3": "four five six"}
    report, progress = IndexReport(book="reembed-shared"), []
    vectors = _vectors(embedder, texts, report, lambda *step: progress.append(step))
    assert list(vectors[stored_key]) == [0.0, 0.0, 1.0]
    assert vectors["k3"] == [13.0, 0.0, 0.0]
    assert embedder.asked == [["one two", "three"], ["four five six"]]
    assert progress == [("embed", 2, 3), ("embed", 3, 3)]
    assert (report.chunks_embedded, report.tokens) == (3, 6)


def test_an_unknown_book_or_an_edition_is_refused_naming_what_to_do():
    root = _book("reembed-root")
    _book("reembed-root-fr", edition_of=root, locale="fr")
    with pytest.raises(IndexingError, match="there is no book 'reembed-nothing'") as unknown:
        reembed_book("reembed-nothing")
    assert unknown.value.code == "unknown_book"
    with pytest.raises(IndexingError, match="re-embed that book") as edition:
        reembed_book("reembed-root-fr")
    assert edition.value.code == "edition" and "'reembed-root'" in edition.value.message
