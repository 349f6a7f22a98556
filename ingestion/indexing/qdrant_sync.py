"""Drift between Postgres (the truth) and the Qdrant mirror, per book, and its repair (``manage.py qdrant_sync``).

A point is *missing* when a chunk has none, *extra* when no chunk of its book (or no book) matches
it, or it sits in the collection of another vector size, and *stale* when its payload or vector
differs from what the chunk's row says. Repair upserts missing and stale points with vectors read
from Postgres in batches and deletes extra ones.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ingestion.indexing.qdrant import (
    BATCH_POINTS,
    CHUNK_FIELDS,
    QdrantError,
    QdrantMirror,
    chunk_payload,
    describe,
    get_mirror,
    not_configured,
    point_id,
)
from ingestion.models import Book, Chunk

# A stored vector whose cosine to the chunk's own vector is below this is stale (Qdrant normalises
# cosine vectors on write, so they are compared by angle, not value by value).
SAME_VECTOR = 1 - 1e-5
EXAMPLES = 20


@dataclass
class ExtraPoint:
    collection: str
    point_id: str | int  # as Qdrant has it (a foreign point may have an integer id)
    chunk_id: str | None


@dataclass
class BookDrift:
    book: str
    in_postgres: bool
    chunks: int = 0  # passages in Postgres
    points: int = 0  # the book's points in Qdrant, in any collection
    missing: list[str] = field(default_factory=list)  # chunk ids
    extra: list[ExtraPoint] = field(default_factory=list)
    stale: list[tuple[str, list[str]]] = field(default_factory=list)  # (chunk id, differing fields or "vector")

    @property
    def in_sync(self) -> bool:
        return not (self.missing or self.extra or self.stale)

    def as_dict(self) -> dict:
        return {
            "book": self.book, "in_postgres": self.in_postgres, "chunks": self.chunks, "points": self.points,
            "missing": len(self.missing), "extra": len(self.extra), "stale": len(self.stale),
            "examples": {
                "missing": self.missing[:EXAMPLES],
                "extra": [{"collection": e.collection, "point_id": e.point_id, "chunk_id": e.chunk_id}
                          for e in self.extra[:EXAMPLES]],
                "stale": [{"chunk_id": cid, "fields": fields} for cid, fields in self.stale[:EXAMPLES]],
            },
        }


@dataclass
class SyncReport:
    qdrant: str
    repair: bool
    collections: list[str] = field(default_factory=list)
    books: list[BookDrift] = field(default_factory=list)
    upserted: int = 0
    deleted: int = 0
    seconds: float = 0.0

    @property
    def in_sync(self) -> bool:
        """Whether the mirror matched Postgres when it was compared (before any repair)."""
        return all(b.in_sync for b in self.books)

    def totals(self) -> dict:
        return {kind: sum(len(getattr(b, kind)) for b in self.books) for kind in ("missing", "extra", "stale")}

    def as_dict(self) -> dict:
        return {"qdrant": self.qdrant, "mode": "repair" if self.repair else "check", "in_sync": self.in_sync,
                "collections": self.collections, "totals": self.totals(), "upserted": self.upserted,
                "deleted": self.deleted, "seconds": round(self.seconds, 3),
                "books": [b.as_dict() for b in self.books]}


def sync_mirror(*, book: str | None = None, repair: bool = True, mirror: QdrantMirror | None = None) -> SyncReport:
    """Compare the mirror with Postgres (one book, or every book plus the points of books that are gone) and,
    with ``repair``, make it equal. Raises ``QdrantError`` when Qdrant is not configured or not reachable,
    and for a ``book`` that neither holds."""
    started = time.monotonic()
    mirror = mirror or get_mirror()
    if mirror is None:
        raise not_configured()
    report = SyncReport(qdrant=describe(), repair=repair, collections=mirror.collections())
    books = Book.objects.order_by("slug")
    if book is not None:
        books = books.filter(slug=book)
    books = list(books)
    for b in books:
        report.books.append(_compare_book(mirror, b, report.collections))
    if book is None or not books:
        report.books += _gone_books(mirror, report.collections, known=[b.slug for b in books], only=book)
        if book is not None and not report.books:
            raise QdrantError(f"there is no book {book!r} in Postgres or in Qdrant", code="unknown_book")
    if repair:
        _repair(mirror, report, {b.slug: b for b in books})
    report.seconds = time.monotonic() - started
    return report


def _compare_book(mirror: QdrantMirror, book: Book, collections: list[str]) -> BookDrift:
    expected = {point_id(row["id"]): row for row in Chunk.objects.filter(book=book).values(*CHUNK_FIELDS)}
    drift = BookDrift(book.slug, in_postgres=True, chunks=len(expected))
    target = mirror.collection(book.embedder_dimension)
    seen = set()
    for name in collections:
        for points in mirror.scroll(name, book=book.slug, with_vectors=name == target):
            to_check = {}
            for point in points:
                drift.points += 1
                pid = str(point.id)
                row = expected.get(pid) if name == target else None
                if row is None:
                    drift.extra.append(ExtraPoint(name, point.id, (point.payload or {}).get("chunk_id")))
                    continue
                seen.add(pid)
                want = chunk_payload(book=book.slug, chunk=row)
                have = point.payload or {}
                fields = sorted(k for k in want.keys() | have.keys() if want.get(k) != have.get(k))
                if fields:
                    drift.stale.append((row["id"], fields))
                else:
                    to_check[row["id"]] = point.vector
            drift.stale += [(cid, ["vector"]) for cid in _stale_vectors(to_check)]
    drift.missing = [row["id"] for pid, row in expected.items() if pid not in seen]
    return drift


def _stale_vectors(stored: dict[str, list[float] | None]) -> list[str]:
    """Chunk ids whose mirrored vector is not (up to normalisation) the one in Postgres."""
    if not stored:
        return []
    truth = dict(Chunk.objects.filter(id__in=list(stored)).values_list("id", "embedding"))
    stale = []
    for cid, vector in stored.items():
        want = np.asarray(truth[cid], dtype=np.float64)
        have = np.asarray(vector if vector is not None else [], dtype=np.float64)
        if have.shape != want.shape:
            stale.append(cid)
            continue
        norms = float(np.linalg.norm(want) * np.linalg.norm(have))
        if not norms or float(want @ have) / norms < SAME_VECTOR:
            stale.append(cid)
    return stale


def _gone_books(mirror: QdrantMirror, collections: list[str], *, known: list[str], only: str | None) -> list[BookDrift]:
    """Points of books Postgres does not have (deleted while Qdrant was down, or never there)."""
    drifts: dict[str, BookDrift] = {}
    for name in collections:
        if only is not None:
            batches = mirror.scroll(name, book=only, with_payload=["book", "chunk_id"])
        else:
            batches = mirror.scroll(name, not_books=known or None, with_payload=["book", "chunk_id"])
        for points in batches:
            for point in points:
                payload = point.payload or {}
                slug = str(payload.get("book") or "(no book)")
                drift = drifts.setdefault(slug, BookDrift(slug, in_postgres=False))
                drift.points += 1
                drift.extra.append(ExtraPoint(name, point.id, payload.get("chunk_id")))
    return [drifts[slug] for slug in sorted(drifts)]


def _repair(mirror: QdrantMirror, report: SyncReport, books: dict[str, Book]) -> None:
    for drift in report.books:
        if not drift.in_postgres:
            continue
        book = books[drift.book]
        ids = list(dict.fromkeys(drift.missing + [cid for cid, _ in drift.stale]))
        for start in range(0, len(ids), BATCH_POINTS):
            rows = Chunk.objects.filter(id__in=ids[start:start + BATCH_POINTS]).values(*CHUNK_FIELDS, "embedding")
            pairs = [(row, row.pop("embedding")) for row in rows]
            report.upserted += mirror.upsert(book=book.slug, dimensions=book.embedder_dimension, rows=pairs)
    by_collection = defaultdict(list)
    for drift in report.books:
        for extra in drift.extra:
            by_collection[extra.collection].append(extra.point_id)
    for name, ids in by_collection.items():
        report.deleted += mirror.delete_points(name, ids)
