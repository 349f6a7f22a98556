"""``ingestion.indexing.storing``: a page's passages stored whole — the ones it kept updated in place with their
vectors untouched, the others created or deleted — the report's counts (also for a dry run, which writes nothing),
and the Qdrant mirror written after the commit, in order, and left alone for the rest of the run after a failure."""

from __future__ import annotations

import pytest

from ingestion.indexing.chunking import ChunkDraft
from ingestion.indexing.qdrant import OUT_OF_DATE, QdrantError
from ingestion.indexing.reports import IndexReport
from ingestion.indexing.storing import PageStore, PreparedPage
from ingestion.models import Book, Chunk, Document
from ingestion.reading.documents import Heading


class ThreeDimensions:
    name, dimension = "storing-test", 3


class RecordingMirror:
    def __init__(self, fail_first: bool = False):
        self.fail_first = fail_first
        self.written: list[str] = []

    def mirror_document(self, document: Document) -> None:
        if self.fail_first and not self.written:
            self.written.append("failed")
            raise QdrantError("connection refused")
        self.written.append(document.path)


def _draft(text: str, anchor: str = "") -> ChunkDraft:
    headings = (Heading(1, "Page", "", 1),) + ((Heading(2, anchor.title(), anchor, 3),) if anchor else ())
    return ChunkDraft(text=text, heading_path="Page", headings=headings, char_start=0, char_end=len(text),
                      line_start=1, line_end=2, token_count=2)


def _page(path: str, chunks: dict[str, str], *, kept: set[str] = frozenset(), removed: int = 0,
          is_new: bool = False) -> PreparedPage:
    drafts = [_draft(text, anchor=f"s-{pid}") for pid, text in chunks.items()]
    ids = list(chunks)
    keys = [f"key-{pid}" for pid in ids]
    vectors = {f"key-{pid}": [float(n), 1.0, 0.0] for n, pid in enumerate(ids) if pid not in kept}
    return PreparedPage(rel_path=path, document_fields={"title": "Page", "url": f"https://example.org/{path[:-3]}"},
                        drafts=drafts, texts=list(chunks.values()), ids=ids, keys=keys, kept_ids=set(kept),
                        removed=removed, vectors=vectors, is_new=is_new)


def _store(report: IndexReport, *, dry_run: bool = False) -> PageStore:
    store = PageStore(slug=report.book, embedder=ThreeDimensions(), report=report, dry_run=dry_run)
    store.mirror = None
    return store


def test_a_dry_run_counts_what_would_change_and_writes_nothing():
    # No django_db mark: a query would fail the test.
    report = IndexReport(book="storing-dry", dry_run=True)
    store = _store(report, dry_run=True)
    store.store(_page("a.md", {"storing-dry-1": "One", "storing-dry-2": "Two"}, kept={"storing-dry-1"}, removed=3,
                      is_new=True))
    assert (report.files_indexed, report.files_added, report.chunks_added, report.chunks_kept,
            report.chunks_removed) == (1, 1, 1, 1, 3)
    assert report.pages["added"] == ["a.md"]


@pytest.mark.django_db
def test_a_changed_page_keeps_its_kept_passages_vectors_and_replaces_the_rest():
    book = Book.objects.create(slug="storing-book", title="S", embedder_name="storing-test", embedder_dimension=3)
    report = IndexReport(book=book.slug)
    store = _store(report)
    store.book = book
    store.store(_page("a.md", {"storing-a": "Alpha", "storing-b": "Beta"}, is_new=True))
    store.store(_page("a.md", {"storing-c": "Gamma", "storing-a": "Alpha again"}, kept={"storing-a"}, removed=1))
    rows = {chunk.id: chunk for chunk in Chunk.objects.filter(book=book)}
    assert sorted(rows) == ["storing-a", "storing-c"]
    kept = rows["storing-a"]
    assert (kept.ordinal, kept.text, list(kept.embedding)) == (1, "Alpha again", [0.0, 1.0, 0.0])
    assert kept.url == "https://example.org/a#s-storing-a" and rows["storing-c"].ordinal == 0
    assert Document.objects.get(book=book).title == "Page"
    assert (report.files_added, report.chunks_added, report.chunks_kept, report.chunks_removed) == (1, 3, 1, 1)
    assert report.pages == {"added": ["a.md"], "changed": ["a.md"], "removed": []}


def test_mirror_writes_wait_for_the_flush_and_a_failure_stops_them_with_one_warning():
    report = IndexReport(book="storing-mirror")
    store = _store(report)
    store.mirror = mirror = RecordingMirror()
    for path in ("a.md", "b.md"):
        store.mirror_write(lambda m, path=path: m.mirror_document(Document(path=path)))
    assert mirror.written == []
    store.flush_mirror()
    assert mirror.written == ["a.md", "b.md"]

    store.mirror = failing = RecordingMirror(fail_first=True)
    for path in ("c.md", "d.md"):
        store.mirror_write(lambda m, path=path: m.mirror_document(Document(path=path)))
    store.flush_mirror()
    assert failing.written == ["failed"] and store.mirror is None
    assert report.warnings == [{"file": None, "line": None, "message": f"{OUT_OF_DATE} (connection refused)"}]
    store.mirror_write(lambda m: m.mirror_document(Document(path="e.md")))
    store.flush_mirror()
    assert failing.written == ["failed"]
