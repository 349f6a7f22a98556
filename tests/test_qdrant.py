"""The Qdrant mirror, in local mode under tmp_path: every write of the indexer mirrored, `qdrant_sync` finding
and repairing drift, dense search on Qdrant giving the same answers as pgvector, and failures that stay
warnings or clear errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid

import numpy as np
import pytest

from chat.pipeline.retrieval import VectorStoreUnavailable, retrieve
from ingestion.indexing.embedders import get_embedder
from ingestion.indexing.qdrant import OUT_OF_DATE, QdrantMirror, chunk_payload, close_client, get_client, point_id
from ingestion.indexing.qdrant_sync import sync_mirror
from ingestion.models import Book, Chunk
from tests.conftest import EMBEDDED_CORPORA, run_command
from tests.support.shared_data import in_session, shared_data

pytestmark = pytest.mark.django_db

BOOK = "tiny-qdrant"
COLLECTION = "bookchat_384"

INTRO = """---
title: Getting started
---

# Getting started

Bookchat indexes a folder of Markdown pages and answers questions from them with citations.
Every answer names the passages it used, so a reader can open the book at the right section and
check the claim for themselves; answers that the book cannot support are refused instead of guessed.

## Install {#install}

Run the installer once. It creates a virtual environment, installs every dependency and starts
the embedded database, so there is nothing else to set up by hand on a fresh machine. The first
start also creates an admin login and prints its password once.
"""

GUIDE = """# Writing guide

Chapters are plain Markdown files. Every chapter starts with a title and explains one idea, with
examples that a student can try on their own machine before moving on to the next chapter.

## Headings

Use second-level headings for sections and third-level headings for subsections; each one gets an
anchor so that answers can link straight to it, and readers land on the right paragraph.

## Code blocks

Fence code with three backticks and name the language, so that the site highlights it and the
chunker never splits a block in the middle of a function or a shell session.
"""


@pytest.fixture(autouse=True)
def no_calibration():
    """Indexing recalibrates the book's scope threshold (~150 retrievals): the mirror's tests don't need it."""
    from chat.receivers import queue_calibration
    from ingestion.signals import book_indexed

    book_indexed.disconnect(queue_calibration)
    yield
    book_indexed.connect(queue_calibration)


@pytest.fixture
def qdrant(tmp_path, settings):
    """A fresh local-mode Qdrant in tmp_path, as the configured mirror."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, "QDRANT_PATH": str(tmp_path / "qdrant"), "QDRANT_URL": ""}
    yield QdrantMirror()
    close_client()


@pytest.fixture(scope="session")
def squad(ingest_corpus):
    """squad2-dev, ingested once per session (before any test's Qdrant settings apply)."""
    run = ingest_corpus("squad2-dev")
    assert run.exit_code == 0, run.report
    return "squad2-dev"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def ingest(book_dir, *args: str) -> tuple[int, dict]:
    code, out, _ = run_command("ingest", str(book_dir.root), "--book", BOOK, "--json", *args)
    return code, json.loads(out)


def make_book(book_dir) -> None:
    book_dir.write("intro.md", INTRO)
    book_dir.write("guides/writing.md", GUIDE)
    book_dir.write("guides/_category_.json", '{"label": "Guides"}')


def points(book: str = BOOK, *, vectors: bool = False) -> dict[str, object]:
    """The book's points in the mirror's 384-dimension collection, by chunk id."""
    found, _ = get_client().scroll(COLLECTION, limit=10_000, with_vectors=vectors, with_payload=True)
    return {p.payload["chunk_id"]: p for p in found if p.payload.get("book") == book}


def expected_payloads(book: str = BOOK) -> dict[str, dict]:
    from ingestion.indexing.qdrant import CHUNK_FIELDS

    return {row["id"]: chunk_payload(book=book, chunk=row)
            for row in Chunk.objects.filter(book__slug=book).values(*CHUNK_FIELDS)}


def sync(*args: str) -> tuple[int, str, str]:
    return run_command("qdrant_sync", *args)


# -- mirroring every write ------------------------------------------------------------------------------
def test_ingesting_a_book_mirrors_every_chunk_with_its_payload(qdrant, book_dir):
    make_book(book_dir)
    code, report = ingest(book_dir)
    assert code == 0 and report["warnings"] == []
    mirrored = points(vectors=True)
    payloads = expected_payloads()
    assert set(mirrored) == set(payloads) and len(payloads) >= 3
    for chunk in Chunk.objects.filter(book__slug=BOOK).select_related("document"):
        point = mirrored[chunk.id]
        assert str(point.id) == point_id(chunk.id)
        assert point.payload == payloads[chunk.id]
        assert point.payload["document"] == chunk.document.path
        assert point.payload["embedding_key"] == chunk.embedding_key
        assert point.payload["document_hash"] == chunk.document.content_hash
        stored = np.asarray(chunk.embedding)
        assert float(np.dot(point.vector, stored) / np.linalg.norm(stored)) == pytest.approx(1.0, abs=1e-5)
    guide = next(p for p in mirrored.values() if p.payload["document"] == "guides/writing.md")
    assert guide.payload["category"] == "Guides" and guide.payload["title"] == "Writing guide"


def test_collection_is_cosine_per_vector_size_with_keyword_indexes(qdrant, book_dir, monkeypatch):
    from qdrant_client import QdrantClient, models

    indexed = []
    original = QdrantClient.create_payload_index

    def spy(self, collection_name, field_name, *args, **kwargs):
        indexed.append((collection_name, field_name, kwargs.get("field_schema")))
        return original(self, collection_name, field_name, *args, **kwargs)

    monkeypatch.setattr(QdrantClient, "create_payload_index", spy)
    make_book(book_dir)
    ingest(book_dir)
    assert qdrant.collections() == [COLLECTION]
    params = get_client().get_collection(COLLECTION).config.params.vectors
    assert params.size == 384 and params.distance == models.Distance.COSINE
    assert sorted(indexed) == [(COLLECTION, "book", models.PayloadSchemaType.KEYWORD),
                               (COLLECTION, "document", models.PayloadSchemaType.KEYWORD)]


def test_reingesting_an_edited_page_updates_and_deletes_its_points(qdrant, book_dir):
    make_book(book_dir)
    ingest(book_dir)
    before = points()
    edited = GUIDE.replace("## Code blocks", "## Tables").replace("Fence code with three backticks",
                                                                     "Keep tables narrow")
    book_dir.write("guides/writing.md", edited)
    code, report = ingest(book_dir)
    assert code == 0 and report["files_indexed"] == 1 and report["chunks_removed"] >= 1
    after = points()
    assert set(after) == set(expected_payloads())
    dropped = set(before) - set(after)
    assert dropped and not dropped & set(Chunk.objects.values_list("id", flat=True))
    guide_hash = Book.objects.get(slug=BOOK).documents.get(path="guides/writing.md").content_hash
    assert {p.payload["document_hash"] for p in after.values() if p.payload["document"] == "guides/writing.md"} \
        == {guide_hash}
    assert all(p.payload == expected_payloads()[cid] for cid, p in after.items())


def test_pruned_and_emptied_pages_lose_their_points(qdrant, book_dir):
    make_book(book_dir)
    book_dir.write("extra.md", "# Extra\n\n" + "An extra page about indexing, pruning and mirroring. " * 8)
    ingest(book_dir)
    assert {p.payload["document"] for p in points().values()} == {"intro.md", "guides/writing.md", "extra.md"}
    (book_dir.root / "guides" / "writing.md").unlink()
    book_dir.write("extra.md", "   \n")
    code, report = ingest(book_dir, "--prune")
    assert code == 0 and report["documents_removed"] == 2
    assert {p.payload["document"] for p in points().values()} == {"intro.md"}
    assert set(points()) == set(expected_payloads())


def test_reindexing_a_book_replaces_its_points(qdrant, book_dir):
    make_book(book_dir)
    ingest(book_dir)
    bogus = str(uuid.uuid4())
    from qdrant_client import models

    get_client().upsert(COLLECTION, points=[models.PointStruct(id=bogus, vector=[0.1] * 384,
                                                               payload={"book": BOOK, "chunk_id": "f" * 40})])
    code, _ = ingest(book_dir, "--reindex")
    assert code == 0
    assert set(points()) == set(expected_payloads())


def test_deleting_a_book_deletes_its_points(qdrant, book_dir, django_capture_on_commit_callbacks):
    make_book(book_dir)
    ingest(book_dir)
    assert points()
    with django_capture_on_commit_callbacks(execute=True):
        Book.objects.get(slug=BOOK).delete()
    assert points() == {}


def test_qdrant_down_during_ingestion_indexes_anyway_with_a_warning(book_dir, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "QDRANT_URL": f"http://127.0.0.1:{closed_port()}", "QDRANT_PATH": ""}
    make_book(book_dir)
    try:
        code, report = ingest(book_dir)
    finally:
        close_client()
    assert code == 0 and report["errors"] == [] and report["files_indexed"] == 2
    mirror_warnings = [w for w in report["warnings"] if OUT_OF_DATE in w["message"]]
    assert len(mirror_warnings) == 1  # once per run, not once per page
    assert Chunk.objects.filter(book__slug=BOOK).count() == report["chunks_added"] > 0


# -- qdrant_sync ------------------------------------------------------------------------------------
@pytest.mark.drill  # seconds long: run with the drills, for make test's time
def test_qdrant_sync_check_reports_each_kind_of_drift_and_repair_fixes_it(qdrant, book_dir, ingest_corpus):
    from qdrant_client import models

    for name in EMBEDDED_CORPORA:  # repair covers every book: none may still be being ingested in the background
        ingest_corpus(name)
    make_book(book_dir)
    ingest(book_dir)
    client = get_client()
    ids = sorted(points())
    lost, corrupted, bent = ids[0], ids[1], ids[2]
    client.delete(COLLECTION, points_selector=models.PointIdsList(points=[point_id(lost)]))
    client.set_payload(COLLECTION, payload={"url": "/somewhere-else"}, points=[point_id(corrupted)])
    client.update_vectors(COLLECTION, points=[models.PointVectors(id=point_id(bent), vector=[0.5] * 384)])
    bogus = str(uuid.uuid4())
    client.upsert(COLLECTION, points=[
        models.PointStruct(id=bogus, vector=[0.1] * 384, payload={"book": BOOK, "chunk_id": "0" * 40}),
        models.PointStruct(id=str(uuid.uuid4()), vector=[0.2] * 384, payload={"book": "gone-book", "chunk_id": "1"}),
    ])

    code, out, _ = sync("--check", "--json")
    assert code == 1
    report = json.loads(out)
    assert report["mode"] == "check" and report["in_sync"] is False and report["upserted"] == report["deleted"] == 0
    books = {b["book"]: b for b in report["books"]}
    tiny = books[BOOK]
    assert tiny["in_postgres"] is True and tiny["chunks"] == len(ids) and tiny["points"] == len(ids)
    assert (tiny["missing"], tiny["extra"], tiny["stale"]) == (1, 1, 2)
    assert tiny["examples"]["missing"] == [lost]
    assert tiny["examples"]["extra"] == [{"collection": COLLECTION, "point_id": bogus, "chunk_id": "0" * 40}]
    assert sorted((s["chunk_id"], s["fields"]) for s in tiny["examples"]["stale"]) == sorted(
        [(corrupted, ["url"]), (bent, ["vector"])])
    gone = books["gone-book"]
    assert gone["in_postgres"] is False and gone["extra"] == 1 and gone["chunks"] == 0

    code, out, _ = sync("--json")  # repairs every book, the session's corpora included
    assert code == 0
    repaired = json.loads(out)
    assert repaired["mode"] == "repair" and repaired["deleted"] == 2
    assert repaired["upserted"] >= 3
    code, out, _ = sync("--check")
    assert code == 0 and "In sync" in out
    assert set(points()) == set(expected_payloads())
    assert points(vectors=True)[bent].vector[0] != pytest.approx(0.5 / np.sqrt(384))


def test_qdrant_sync_human_output_for_one_book(qdrant, book_dir):
    make_book(book_dir)
    ingest(book_dir)
    code, out, _ = sync("--check", "--book", BOOK)
    assert code == 0
    assert f"{BOOK}: " in out and "in sync" in out and "In sync" in out
    chunk_id = sorted(points())[0]
    get_client().set_payload(COLLECTION, payload={"heading_path": "Wrong"}, points=[point_id(chunk_id)])
    code, out, _ = sync("--check", "--book", BOOK)
    assert code == 1
    assert "1 stale" in out and f"{chunk_id} (heading_path)" in out and "Run `manage.py qdrant_sync`" in out
    code, out, _ = sync("--book", BOOK)
    assert code == 0 and "Repaired 0 missing, 0 extra, 1 stale: 1 points written, 0 deleted" in out
    assert sync("--check", "--book", BOOK)[0] == 0


def test_qdrant_sync_cleans_up_a_book_that_is_gone(qdrant, book_dir):
    make_book(book_dir)
    ingest(book_dir)
    count = len(points())
    Book.objects.get(slug=BOOK).delete()  # inside the test's transaction: the on-commit deletion never runs
    assert len(points()) == count
    code, out, _ = sync("--check", "--book", BOOK, "--json")
    assert code == 1
    [gone] = json.loads(out)["books"]
    assert gone["in_postgres"] is False and gone["extra"] == count
    assert sync("--book", BOOK)[0] == 0
    assert points() == {}


def test_qdrant_sync_not_configured_exits_2(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "QDRANT_URL": "", "QDRANT_PATH": ""}
    code, _, err = sync("--check")
    assert code == 2 and "not configured" in err and "BOOKCHAT_QDRANT_URL" in err
    code, out, _ = sync("--json")
    assert code == 2 and json.loads(out)["error"] == "qdrant_not_configured"


def test_qdrant_sync_unreachable_exits_2(settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "QDRANT_URL": f"http://127.0.0.1:{closed_port()}", "QDRANT_PATH": ""}
    try:
        code, _, err = sync("--check")
    finally:
        close_client()
    assert code == 2 and "Qdrant (http://127.0.0.1:" in err


def test_qdrant_sync_unknown_book_exits_2(qdrant):
    code, _, err = sync("--book", "no-such-book")
    assert code == 2 and "no book 'no-such-book'" in err


def test_local_mode_folder_is_locked_by_its_process(qdrant, settings):
    """A second process cannot open the same local-mode folder: the manual's one-process caveat."""
    get_client()
    code = f"from qdrant_client import QdrantClient\nQdrantClient(path={settings.BOOKCHAT['QDRANT_PATH']!r})\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "already accessed by another instance" in result.stderr


# -- dense search on Qdrant -------------------------------------------------------------------------------
def squad_questions(count: int) -> list[dict]:
    path = shared_data() / "squad2-dev" / "questions.jsonl"
    rows = in_session("squad2-dev", [json.loads(line) for line in path.read_text().splitlines() if line.strip()])
    answerable = [r for r in rows if r["kind"] == "answerable"]
    return answerable[::max(1, len(answerable) // count)][:count]


@pytest.mark.slow
@pytest.mark.needs("shared-data")
def test_qdrant_and_pgvector_retrieve_the_same_top_five(squad, qdrant, settings):
    report = sync_mirror(book=squad)
    assert report.upserted == report.books[0].chunks > 0
    book = Book.objects.get(slug=squad)
    embedder = get_embedder()
    settings.BOOKCHAT = {**settings.BOOKCHAT, "RETRIEVAL_SECONDS": 30.0}
    questions = squad_questions(20)
    cases = [(q["question"], None) for q in questions] + [(q["question"], q["doc"]) for q in questions[:5]]
    for question, chapter in cases:
        vector = embedder.embed_query(question)
        results = {}
        for store in ("pgvector", "qdrant"):
            settings.BOOKCHAT = {**settings.BOOKCHAT, "VECTOR_STORE": store}
            results[store] = retrieve(book=book, question=question, chapter=chapter, top_k=5, query_vector=vector)
        pg, qd = results["pgvector"], results["qdrant"]
        assert [c.id for c in qd.chunks] == [c.id for c in pg.chunks], (question, chapter)
        assert [c.dense for c in qd.chunks] == pytest.approx([c.dense for c in pg.chunks], abs=1e-5)
        assert qd.best_cosine == pytest.approx(pg.best_cosine, abs=1e-5)
        if chapter:
            assert {c.document_path for c in qd.chunks} == {chapter}


def test_qdrant_hits_that_postgres_no_longer_has_are_skipped(qdrant, book_dir, settings):
    from qdrant_client import models

    make_book(book_dir)
    ingest(book_dir)
    question = "How do I install bookchat?"
    vector = get_embedder().embed_query(question)
    ghost = "e" * 40  # a chunk deleted from Postgres while Qdrant was down: the nearest point of all
    get_client().upsert(COLLECTION, points=[models.PointStruct(
        id=point_id(ghost), vector=[float(x) for x in vector], payload={"book": BOOK, "chunk_id": ghost,
                                                                       "document": "intro.md"})])
    settings.BOOKCHAT = {**settings.BOOKCHAT, "VECTOR_STORE": "qdrant", "RETRIEVAL_SECONDS": 30.0}
    result = retrieve(book=Book.objects.get(slug=BOOK), question=question, query_vector=vector)
    assert result.chunks and ghost not in {c.id for c in result.pool}
    assert result.best_cosine < 0.9999


def test_vector_store_qdrant_without_qdrant_is_a_configuration_error(book_dir, settings, client):
    make_book(book_dir)
    ingest(book_dir)
    settings.BOOKCHAT = {**settings.BOOKCHAT, "VECTOR_STORE": "qdrant", "QDRANT_URL": "", "QDRANT_PATH": ""}
    with pytest.raises(VectorStoreUnavailable) as caught:
        retrieve(book=Book.objects.get(slug=BOOK), question="How do I install it?")
    assert caught.value.code == "configuration" and "BOOKCHAT_QDRANT_URL" in caught.value.message
    response = client.post("/api/v1/ask", data=json.dumps({"book": BOOK, "question": "How do I install it?"}),
                           content_type="application/json")
    assert response.status_code == 503
    assert response.json()["error"] == "configuration"


def test_vector_store_qdrant_before_any_sync_is_a_clear_error(qdrant, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "VECTOR_STORE": "qdrant"}
    book = Book(slug="never-synced", title="x", embedder_name=get_embedder().name, embedder_dimension=384)
    book.save()
    with pytest.raises(VectorStoreUnavailable) as caught:
        retrieve(book=book, question="anything at all")
    assert "qdrant_sync" in caught.value.message
