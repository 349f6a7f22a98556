"""The optional Qdrant mirror of the passages: one collection per vector size, one point per chunk.

Postgres stays the truth; the mirror copies it when ``BOOKCHAT_QDRANT_URL`` (a server) or
``BOOKCHAT_QDRANT_PATH`` (local mode, one process only) is set. The indexer mirrors each page
after its transaction commits; ``qdrant_sync`` (ingestion/indexing/qdrant_sync.py) finds and repairs drift;
retrieval may search here instead of pgvector (``BOOKCHAT_VECTOR_STORE=qdrant``).
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

from django.core.signals import setting_changed
from django.db import transaction
from django.dispatch import receiver

from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError
from ingestion.models import Chunk, Document

if TYPE_CHECKING:  # qdrant_client takes ~2 s to import: only when the mirror is configured
    from qdrant_client import QdrantClient

logger = logging.getLogger(__name__)

# Point ids are UUIDs (Qdrant takes an unsigned int or a UUID; chunk ids are 40 hex characters):
# uuid5 of the chunk id in this namespace, so the same chunk always lands on the same point.
POINT_NAMESPACE = uuid.UUID("23695ca7-95e6-403e-b61c-b8d3aacc2a46")
# Payload fields with a keyword index: every filter bookchat sends uses them.
INDEXED_FIELDS = ("book", "document")
BATCH_POINTS = 256
TIMEOUT_SECONDS = 10
OUT_OF_DATE = "Qdrant mirror out of date: run `manage.py qdrant_sync`"

T = TypeVar("T")


class QdrantError(BookchatError):
    """Qdrant is not configured, unreachable, or refused a request."""

    code = "qdrant_unavailable"


def not_configured() -> QdrantError:
    return QdrantError("Qdrant is not configured: set BOOKCHAT_QDRANT_URL (a server) or BOOKCHAT_QDRANT_PATH "
                       "(local mode)", code="qdrant_not_configured")


def point_id(chunk_id: str) -> str:
    return str(uuid.uuid5(POINT_NAMESPACE, chunk_id))


def chunk_payload(*, book: str, chunk: dict) -> dict:
    """The payload of a chunk's point, from a row of ``CHUNK_FIELDS``. ``embedding_key`` is the chunk's own
    content hash (embedder + embedded text, so it names the vector); ``document_hash`` the page's file hash."""
    return {
        "book": book,
        "document": chunk["document__path"],
        "chunk_id": chunk["id"],
        "embedding_key": chunk["embedding_key"],
        "document_hash": chunk["document__content_hash"],
        "heading_path": chunk["heading_path"],
        "url": chunk["url"],
        "ordinal": chunk["ordinal"],
        "category": chunk["document__category"],  # the chapter label (the page's folder)
        "title": chunk["document__title"],
    }


CHUNK_FIELDS = ("id", "embedding_key", "heading_path", "url", "ordinal", "document__path",
                "document__content_hash", "document__category", "document__title")


# -- one client per process -------------------------------------------------------------------------
_lock = threading.RLock()
_client: tuple[tuple, QdrantClient] | None = None
_collections_seen: set[str] = set()  # collections known to exist on that client


def _config() -> tuple[str, str, str]:
    return setting("QDRANT_URL").strip(), setting("QDRANT_PATH").strip(), setting("QDRANT_API_KEY")


def is_configured() -> bool:
    url, path, _ = _config()
    return bool(url or path)


def describe() -> str:
    url, path, _ = _config()
    return url or f"local mode at {path}"


def get_client() -> QdrantClient:
    """The process's client for the configured Qdrant (local mode holds a file lock: one client per path)."""
    global _client
    url, path, api_key = key = _config()
    if not (url or path):
        raise not_configured()
    with _lock:
        if _client is not None and _client[0] == key:
            return _client[1]
        close_client()
        try:  # an extra; the system check reports it missing at start, this for the commands that skip checks
            from qdrant_client import QdrantClient
        except ImportError:
            raise QdrantError("the Qdrant mirror needs qdrant-client: pip install 'bookchat[qdrant]'",
                              code="qdrant_not_installed") from None
        try:
            if url:
                client = QdrantClient(url=url, api_key=api_key or None, timeout=TIMEOUT_SECONDS,
                                      check_compatibility=False)
            else:  # calls are serialised by _lock, so the client may move between threads
                client = QdrantClient(path=path, force_disable_check_same_thread=True)
        except Exception as exc:  # local mode: the folder is locked by another process
            raise QdrantError(f"cannot open Qdrant ({describe()}): {exc}") from exc
        _client = (key, client)
        return client


def close_client() -> None:
    global _client
    with _lock:
        _collections_seen.clear()
        if _client is not None:
            _, client = _client
            _client = None
            try:
                client.close()
            except Exception:  # closing must never fail the caller
                logger.debug("closing the Qdrant client failed", exc_info=True)


@receiver(setting_changed)
def _close_on_change(*, setting: str, **kwargs) -> None:
    if setting == "BOOKCHAT" and _client is not None and _client[0] != _config():
        close_client()


# -- the mirror --------------------------------------------------------------------------------------
class QdrantMirror:
    """Writes, reads and searches the mirror. Every failure is a ``QdrantError``."""

    def __init__(self, prefix: str | None = None):
        self.prefix = prefix or setting("QDRANT_COLLECTION")

    def collection(self, dimensions: int) -> str:
        return f"{self.prefix}_{int(dimensions)}"

    @contextmanager
    def _calling(self) -> Iterator[QdrantClient]:
        """The client, with failures made clear (and calls serialised in local mode, which is not thread-safe)."""
        local = not _config()[0]
        with _lock if local else nullcontext():
            client = get_client()
            try:
                yield client
            except QdrantError:
                raise
            except Exception as exc:
                raise QdrantError(f"Qdrant ({describe()}) failed: {type(exc).__name__}: {str(exc)[:300]}") from exc

    def _call(self, fn: Callable[[QdrantClient], T]) -> T:
        with self._calling() as client:
            return fn(client)

    # -- collections
    def collections(self) -> list[str]:
        """The mirror's collections (``<prefix>_<size>``) that exist."""
        pattern = re.compile(rf"{re.escape(self.prefix)}_\d+")
        names = self._call(lambda c: [col.name for col in c.get_collections().collections])
        return sorted(n for n in names if pattern.fullmatch(n))

    def exists(self, name: str) -> bool:
        if name not in _collections_seen and self._call(lambda c: c.collection_exists(name)):
            _collections_seen.add(name)
        return name in _collections_seen

    def ensure_collection(self, dimensions: int) -> str:
        """Create the collection for this vector size (cosine, keyword indexes on book and document) if needed."""
        name = self.collection(dimensions)
        if name in _collections_seen:
            return name
        from qdrant_client import models

        with self._calling() as client:
            if not client.collection_exists(name):
                client.create_collection(name, vectors_config=models.VectorParams(
                    size=int(dimensions), distance=models.Distance.COSINE))
                with warnings.catch_warnings():  # local mode warns that it has no payload indexes
                    warnings.simplefilter("ignore", UserWarning)
                    for field in INDEXED_FIELDS:
                        client.create_payload_index(name, field, field_schema=models.PayloadSchemaType.KEYWORD)
        _collections_seen.add(name)
        return name

    # -- writes
    def upsert(self, *, book: str, dimensions: int, rows: Iterable[tuple[dict, Any]]) -> int:
        """Write points from ``(CHUNK_FIELDS row, vector)`` pairs; returns how many."""
        from qdrant_client import models

        name = self.ensure_collection(dimensions)
        count = 0
        batch = []
        for row, vector in rows:
            batch.append(models.PointStruct(id=point_id(row["id"]), vector=[float(x) for x in vector],
                                            payload=chunk_payload(book=book, chunk=row)))
            if len(batch) == BATCH_POINTS:
                count += self._upsert(name, batch)
                batch = []
        if batch:
            count += self._upsert(name, batch)
        return count

    def _upsert(self, name: str, points: list) -> int:
        self._call(lambda c: c.upsert(name, points=points, wait=True))
        return len(points)

    def mirror_document(self, document: Document) -> int:
        """Make the page's points equal to its stored chunks: upsert them all (vectors as stored), then delete
        the page's other points. Returns the points written."""
        book = document.book
        rows = Chunk.objects.filter(document=document).values(*CHUNK_FIELDS, "embedding")
        pairs = [(row, row.pop("embedding")) for row in rows]
        written = self.upsert(book=book.slug, dimensions=book.embedder_dimension, rows=pairs)
        self.delete_where(book=book.slug, documents=[document.path], keep=[row["id"] for row, _ in pairs],
                          collections=[self.collection(book.embedder_dimension)])
        return written

    def delete_where(self, *, book: str, documents: list[str] | None = None, keep: list[str] = (),
                     collections: list[str] | None = None) -> None:
        """Delete a book's points (only those of ``documents``, when given; never those of the ``keep``
        chunk ids), by default from every collection of the mirror: a book re-indexed with another embedder
        may have left points in a collection of another size."""
        from qdrant_client import models

        must = [models.FieldCondition(key="book", match=models.MatchValue(value=book))]
        if documents is not None:
            must.append(models.FieldCondition(key="document", match=models.MatchAny(any=list(documents))))
        must_not = [models.HasIdCondition(has_id=[point_id(cid) for cid in keep])] if keep else None
        selector = models.FilterSelector(filter=models.Filter(must=must, must_not=must_not))
        for name in self.collections() if collections is None else filter(self.exists, collections):
            self._call(lambda c, name=name: c.delete(name, points_selector=selector, wait=True))

    def delete_points(self, collection: str, ids: list[str]) -> int:
        from qdrant_client import models

        for start in range(0, len(ids), BATCH_POINTS):
            chunk = ids[start:start + BATCH_POINTS]
            self._call(lambda c, chunk=chunk: c.delete(collection, points_selector=models.PointIdsList(points=chunk),
                                                       wait=True))
        return len(ids)

    # -- reads
    def scroll(self, collection: str, *, book: str | None = None, not_books: list[str] | None = None,
               with_vectors: bool = False, with_payload: bool | list[str] = True) -> Iterator[list]:
        """Batches of points of a collection: those of ``book``, or those whose book is none of ``not_books``."""
        from qdrant_client import models

        query_filter = None
        if book is not None:
            query_filter = models.Filter(must=[models.FieldCondition(key="book", match=models.MatchValue(value=book))])
        elif not_books is not None:
            query_filter = models.Filter(must_not=[models.FieldCondition(key="book",
                                                                         match=models.MatchAny(any=not_books))])
        offset = None
        while True:
            points, offset = self._call(lambda c, offset=offset: c.scroll(
                collection, scroll_filter=query_filter, limit=BATCH_POINTS, offset=offset,
                with_payload=with_payload, with_vectors=with_vectors))
            if points:
                yield points
            if offset is None:
                return

    def search(self, *, book: str, dimensions: int, vector, limit: int, documents: list[str] | None = None,
               timeout_seconds: float | None = None) -> list[tuple[str, float]]:
        """(chunk id, cosine similarity) of the ``limit`` points of ``book`` nearest to ``vector``, best first."""
        from qdrant_client import models

        must = [models.FieldCondition(key="book", match=models.MatchValue(value=book))]
        if documents is not None:
            must.append(models.FieldCondition(key="document", match=models.MatchAny(any=documents)))
        name = self.collection(dimensions)
        timeout = max(1, int(timeout_seconds + 0.999)) if timeout_seconds is not None else None
        if not self.exists(name):
            raise QdrantError(f"Qdrant has no collection {name!r} yet: run `manage.py qdrant_sync`",
                              code="qdrant_not_synced")
        with self._calling() as client:
            found = client.query_points(name, query=[float(x) for x in vector], query_filter=models.Filter(must=must),
                                        limit=limit, with_payload=["chunk_id"], timeout=timeout)
        return [(p.payload["chunk_id"], float(p.score)) for p in found.points if p.payload.get("chunk_id")]


def get_mirror() -> QdrantMirror | None:
    """The mirror when Qdrant is configured, else None. Connects lazily, at the first call."""
    return QdrantMirror() if is_configured() else None


# -- book deletion (the admin, a shell) ------------------------------------------------------------
def forget_book(slug: str) -> None:
    """Delete a deleted book's points; a failure is logged (``qdrant_sync`` repairs it) and never raised."""
    mirror = get_mirror()
    if mirror is None:
        return
    try:
        mirror.delete_where(book=slug)
    except QdrantError as exc:
        logger.error("%s: deleting book %r's points failed: %s", OUT_OF_DATE, slug, exc.message)


def book_deleted(sender, instance, **kwargs) -> None:
    """``post_delete`` of Book: drop its points once the deletion commits (a rolled-back delete keeps them)."""
    if is_configured():
        slug = instance.slug
        transaction.on_commit(lambda: forget_book(slug))
