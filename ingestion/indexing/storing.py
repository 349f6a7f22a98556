"""Storing an indexed page: its passages replaced in one transaction (a savepoint of the run's switch), and the
writes copied to the optional Qdrant mirror (``qdrant``) once the switch has committed.

Decisions:
- A page is written whole or not at all: a failure leaves it on its old passages.
  Passages the page kept are updated in place (their vectors untouched); the others are deleted or created.
- The mirror is written after the commit (``flush_mirror``), never with writes a rollback would undo.
- A mirror failure never fails the run: it is logged and reported once, and the mirror is left alone for the
  rest of the run (``manage.py qdrant_sync`` repairs it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction

from ingestion.indexing.chunking import ChunkDraft
from ingestion.indexing.embedders import Embedder
from ingestion.indexing.qdrant import OUT_OF_DATE, QdrantError, QdrantMirror, get_mirror
from ingestion.indexing.reports import IndexReport
from ingestion.models import Book, Chunk, Document
from ingestion.reading.documents import Issue

logger = logging.getLogger(__name__)


@dataclass
class PreparedPage:
    """A changed page, chunked and diffed against what is stored, waiting for its new vectors."""

    rel_path: str
    document_fields: dict
    drafts: list[ChunkDraft]
    texts: list[str]  # the drafts' text as stored: book links rewritten (ids and keys stay those of the drafts)
    ids: list[str]
    keys: list[str]
    kept_ids: set[str]
    removed: int  # stored chunks of the page that the new version no longer has
    vectors: dict[str, list[float]]  # embedding_key → vector, filled from the store, then the embedder
    is_new: bool = False  # the book has no page at this path yet

    def new_chunks(self):
        """(draft, id, key) of the chunks the page does not have yet."""
        return [(d, i, k) for d, i, k in zip(self.drafts, self.ids, self.keys, strict=True) if i not in self.kept_ids]


class PageStore:
    """Where one run writes: its book's pages and passages, and the mirror. ``book`` is set once the run has it."""

    def __init__(self, *, slug: str, embedder: Embedder, report: IndexReport, dry_run: bool):
        self.slug = slug
        self.embedder = embedder
        self.report = report
        self.dry_run = dry_run
        self.book: Book | None = None
        self.mirror: QdrantMirror | None = None if dry_run else get_mirror()
        self._mirror_writes: list[Callable[[QdrantMirror], object]] = []

    def store(self, page: PreparedPage) -> None:
        if not self.dry_run:
            self._write(page)
        self.report.files_indexed += 1
        if page.is_new:
            self.report.files_added += 1
        self.report.page_changed("added" if page.is_new else "changed", page.rel_path)
        self.report.chunks_added += len(page.ids) - len(page.kept_ids)
        self.report.chunks_kept += len(page.kept_ids)
        self.report.chunks_removed += page.removed

    def _write(self, page: PreparedPage) -> None:
        with transaction.atomic():
            document, _ = Document.objects.update_or_create(
                book=self.book, path=page.rel_path, defaults=page.document_fields
            )
            Chunk.objects.filter(document=document).exclude(id__in=page.ids).delete()
            rows = [self._chunk_row(document, n, draft, text, pid, key, page)
                    for n, (draft, text, pid, key)
                    in enumerate(zip(page.drafts, page.texts, page.ids, page.keys, strict=True))]
            Chunk.objects.bulk_create([r for r in rows if r.id not in page.kept_ids], batch_size=500)
            kept = [r for r in rows if r.id in page.kept_ids]
            if kept:
                Chunk.objects.bulk_update(kept, ["ordinal", "anchor", "url", "text", "char_start", "char_end",
                                                 "line_start", "line_end", "token_count", "continued"],
                                          batch_size=500)
        self.mirror_write(lambda mirror: mirror.mirror_document(document))

    def _chunk_row(self, document: Document, ordinal: int, draft: ChunkDraft, text: str, pid: str, key: str,
                   page: PreparedPage) -> Chunk:
        anchor = draft.anchor
        return Chunk(
            id=pid, book=self.book, document=document, ordinal=ordinal, heading_path=draft.heading_path[:2000],
            anchor=anchor[:300], url=document.url + (f"#{anchor}" if anchor else ""), text=text,
            char_start=draft.char_start, char_end=draft.char_end, line_start=draft.line_start,
            line_end=draft.line_end, token_count=draft.token_count, continued=draft.continued,
            embedding_key=key, dimensions=self.embedder.dimension, search_config=self.book.search_config,
            embedding=page.vectors.get(key),  # None for kept rows: bulk_update leaves their vector alone
        )

    def remove_documents(self, documents: list[Document]) -> None:
        for document in documents:
            self.report.documents_removed += 1
            self.report.page_changed("removed", document.path)
            self.report.chunks_removed += document.chunks.count()
            if not self.dry_run:
                document.delete()
        if documents:
            paths = [d.path for d in documents]
            self.mirror_write(lambda mirror: mirror.delete_where(book=self.slug, documents=paths))

    def mirror_write(self, write: Callable[[QdrantMirror], object]) -> None:
        """Copy a write to the mirror once the run's switch has committed (``flush_mirror``)."""
        if self.mirror is not None:
            self._mirror_writes.append(write)

    def flush_mirror(self) -> None:
        """Make the mirror's writes, in order. A failure never fails the run: it is logged and reported once, and
        the mirror is left alone for the rest of the run (``qdrant_sync`` repairs it)."""
        writes, self._mirror_writes = self._mirror_writes, []
        for write in writes:
            if self.mirror is None:
                return
            self._mirror(write)

    def _mirror(self, write: Callable[[QdrantMirror], object]) -> None:
        try:
            write(self.mirror)
        except Exception as exc:
            if isinstance(exc, QdrantError):
                logger.warning("%s: %s", OUT_OF_DATE, exc.message)
            else:
                logger.exception(OUT_OF_DATE)
            self.report.warn(Issue(None, None, f"{OUT_OF_DATE} ({getattr(exc, 'message', None) or exc})"))
            self.mirror = None
