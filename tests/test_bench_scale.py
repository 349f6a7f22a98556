"""The scale benchmark's disk column: a book's own rows and the indexes a table of them alone would have."""

from __future__ import annotations

import pytest

from bench import scale
from ingestion.models import Book, Chunk, Document
from tests.conftest import MANUAL

pytestmark = pytest.mark.django_db


@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_disk_per_1k_chunks_is_the_books_own_not_the_space_deleted_books_left_in_shared_indexes(manual_book):
    book = Book.objects.get(slug=MANUAL)
    before = scale.disk_per_1k_mb(book, hnsw_mb=0.0)
    row_mb = sum(len(c.text.encode()) for c in Chunk.objects.filter(book=book)) / book.chunks.count() * 1000 / 1e6
    assert before > row_mb, "rows with their vectors, tsvectors and indexes take more than their text"

    # Another book comes and goes: the live table's indexes keep its entries' space, a scratch copy has none.
    other = Book.objects.create(slug="comes-and-goes", title="Comes and goes", embedder_name=book.embedder_name,
                                embedder_dimension=book.embedder_dimension)
    page = Document.objects.create(book=other, path="page.md", title="Page", content_hash="x")
    copies = []
    for n in range(4):
        for chunk in Chunk.objects.filter(book=book):
            chunk.pk, chunk.book, chunk.document = f"copy-{n}-{chunk.pk}"[:64], other, page
            copies.append(chunk)
    Chunk.objects.bulk_create(copies, batch_size=500)
    other.delete()

    assert scale.disk_per_1k_mb(book, hnsw_mb=0.0) == pytest.approx(before, rel=0.01)
    assert scale.disk_per_1k_mb(book, hnsw_mb=2.0) == pytest.approx(
        before + 2.0 * 1000 / book.chunks.count(), rel=0.01), "the book's own HNSW index counts in full"
