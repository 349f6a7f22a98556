"""A book embedded again from what bookchat stored (``manage.py reembed BOOK``): after the embedder changed, with no
source folder to read (a book built from admin uploads, whose files are deleted once indexed; a folder since moved).

Every passage's embedded text is rebuilt from its stored row (``embedding_text``: heading path, then text, exactly
what indexing embedded), embedded with the configured embedder, and the book's vectors, keys, sizes and token counts
are replaced in one transaction: answers read the old vectors until the switch, the new ones after, never a mix.
Passages and their ids, pages, URLs and lexical statistics stay as they are. Then, as after any indexing run, the
book's own HNSW index is rebuilt for the new size, the Qdrant mirror is repaired, and ``book_indexed`` lets chat
recalibrate the book and embed its sentences again. A site's editions are embedded with it.
"""

from __future__ import annotations

import logging
import time

from django.db import transaction
from django.utils import timezone

from bookchat.base.conf import setting
from ingestion.indexing.chunking import embedding_text
from ingestion.indexing.embedders import Embedder, get_embedder
from ingestion.indexing.indexer import embedding_key
from ingestion.indexing.ingesting import BookLock
from ingestion.indexing.qdrant import is_configured
from ingestion.indexing.qdrant_sync import sync_mirror
from ingestion.indexing.reports import IndexingError, IndexReport, ProgressCallback
from ingestion.indexing.vector_index import sync_book_index
from ingestion.models import Book, Chunk, IndexRun
from ingestion.signals import book_indexed

logger = logging.getLogger(__name__)

TRIGGER = "reembed"
WRITE_BATCH = 500


def reembed_book(slug: str, *, progress: ProgressCallback | None = None) -> list[IndexReport]:
    """Embed book ``slug`` (and its editions) again from its stored passages; one report per book."""
    root = Book.objects.filter(slug=slug).first()
    if root is None:
        known = ", ".join(Book.objects.roots().order_by("slug").values_list("slug", flat=True)) or "none yet"
        raise IndexingError(f"there is no book {slug!r} (books: {known})", code="unknown_book")
    if root.edition_of_id:
        raise IndexingError(f"{slug!r} is an edition of {root.edition_of.slug!r}: re-embed that book, which embeds "
                            "its editions with it", code="edition")
    embedder = get_embedder()
    return [_reembed(book, embedder, progress or (lambda *args: None))
            for book in [root, *root.editions.order_by("pk")]]


def _reembed(book: Book, embedder: Embedder, progress: ProgressCallback) -> IndexReport:
    started = time.monotonic()
    report = IndexReport(book=book.slug)
    with BookLock(book.slug):
        rows = list(Chunk.objects.filter(book=book).order_by("pk").values_list("pk", "heading_path", "text"))
        texts = {pk: embedding_text(heading, text) for pk, heading, text in rows}
        keys = {pk: embedding_key(embedder.name, text) for pk, text in texts.items()}
        vectors = _vectors(embedder, {keys[pk]: text for pk, text in texts.items()}, report, progress)
        with transaction.atomic():
            run = IndexRun.objects.create(book=book, source="stored passages", trigger=TRIGGER,
                                          options={"from_embedder": book.embedder_name})
            for start in range(0, len(rows), WRITE_BATCH):
                batch = [Chunk(pk=pk, embedding=vectors[keys[pk]], embedding_key=keys[pk],
                               dimensions=embedder.dimension, token_count=embedder.count_tokens(texts[pk]))
                         for pk, _, _ in rows[start:start + WRITE_BATCH]]
                Chunk.objects.bulk_update(batch, ["embedding", "embedding_key", "dimensions", "token_count"])
                progress("store", min(start + WRITE_BATCH, len(rows)), len(rows))
            Book.objects.filter(pk=book.pk).update(embedder_name=embedder.name,
                                                   embedder_dimension=embedder.dimension)
            book.embedder_name, book.embedder_dimension = embedder.name, embedder.dimension
            report.files_seen = report.files_unchanged = book.documents.count()
            report.chunks_kept = len(rows)
            report.total_seconds = time.monotonic() - started
            run.status, run.report, run.finished_at = IndexRun.Status.DONE, report.as_dict(), timezone.now()
            run.chunks_embedded, run.embed_seconds, run.total_seconds = (report.chunks_embedded, report.embed_seconds,
                                                                         report.total_seconds)
            run.save()
    _after(book, len(rows))
    book_indexed.send(sender=Book, book=book, report=report, changed=True, trigger=TRIGGER)
    return report


def _vectors(embedder: Embedder, texts: dict[str, str], report: IndexReport, progress: ProgressCallback) -> dict:
    """A vector for each embedding key: any book's stored vector of the same text by the same embedder, else a new
    one (as indexing shares them)."""
    found = dict(Chunk.objects.filter(embedding_key__in=list(texts)).order_by("embedding_key")
                 .distinct("embedding_key").values_list("embedding_key", "embedding"))
    needed = [key for key in texts if key not in found]
    batch, began = setting("EMBED_BATCH_SIZE"), time.monotonic()
    for start in range(0, len(needed), batch):
        keys = needed[start:start + batch]
        found.update(zip(keys, embedder.embed_documents([texts[k] for k in keys], batch_size=batch), strict=True))
        progress("embed", min(start + batch, len(needed)), len(needed))
    report.chunks_embedded = len(needed)
    report.tokens = sum(embedder.count_tokens(texts[key]) for key in needed)
    report.embed_seconds = time.monotonic() - began
    return found


def _after(book: Book, passages: int) -> None:
    """The book's own HNSW index at its new size, and the mirror's points with the new vectors: failures are logged
    and leave the shared index, or a mirror that ``qdrant_sync`` repairs later."""
    try:
        sync_book_index(book, passages)
    except Exception:
        logger.exception("building the search index of book %s failed", book.slug)
    if is_configured():
        try:
            sync_mirror(book=book.slug, repair=True)
        except Exception:
            logger.exception("repairing the Qdrant mirror of book %s failed", book.slug)
