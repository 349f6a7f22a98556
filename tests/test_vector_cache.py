"""Passage vectors kept on disk (``BOOKCHAT_EMBEDDING_CACHE``, ``embedders.VectorCache``): read back instead of
embedded, made and kept when missing, and a damaged or unwritable cache costs only the reuse."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ingestion.indexing.embedders import VectorCache, get_embedder

PASSAGES = ["The lantern room holds a brass lens that turns once every twelve seconds.",
            "The keepers polish the lens with chamois leather every morning at six."]


@pytest.fixture
def cache_folder(settings, tmp_path):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "EMBEDDING_CACHE": str(tmp_path / "vectors")}
    return tmp_path / "vectors"


def test_without_the_setting_nothing_is_written(settings, tmp_path):
    settings.BOOKCHAT = {**settings.BOOKCHAT, "EMBEDDING_CACHE": ""}
    assert VectorCache.configured(get_embedder()) is None
    get_embedder().embed_documents(PASSAGES)
    assert not list(tmp_path.iterdir())


def test_vectors_made_once_are_kept_and_read_back_as_they_were(cache_folder):
    """... in files the umask lets others read (a deployment's containers read the cache as another user)."""
    embedder = get_embedder()
    umask = os.umask(0o022)
    try:
        made = embedder.embed_documents(PASSAGES)
    finally:
        os.umask(umask)
    files = sorted(p for p in cache_folder.rglob("*") if p.is_file())
    assert len(files) == len(PASSAGES)
    assert all(f.stat().st_size == embedder.dimension * 4 and f.stat().st_mode & 0o777 == 0o644 for f in files)
    again = embedder.embed_documents(list(reversed(PASSAGES)))
    assert np.array_equal(again, made[::-1])


def test_a_kept_vector_is_read_instead_of_embedded(cache_folder):
    """What the cache holds is what comes back (so a text it holds is never embedded), and only the text it
    lacks is embedded and added."""
    embedder = get_embedder()
    cache = VectorCache.configured(embedder)
    planted = np.zeros(embedder.dimension, dtype=np.float32)
    planted[0] = 1.0
    cache.put([PASSAGES[0]], planted[None, :])
    vectors = embedder.embed_documents(PASSAGES)
    assert np.array_equal(vectors[0], planted)
    assert abs(float(np.linalg.norm(vectors[1])) - 1.0) < 1e-3 and vectors[1][0] != 1.0
    assert cache.get([PASSAGES[1]])[0] is not None


def test_a_cut_short_file_is_embedded_again_and_replaced(cache_folder):
    embedder = get_embedder()
    cache = VectorCache.configured(embedder)
    path = cache.path(PASSAGES[0])
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\x00" * 10)
    vector = embedder.embed_documents(PASSAGES[:1])[0]
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-3
    assert path.stat().st_size == embedder.dimension * 4


def test_another_embedder_never_reads_these_vectors(cache_folder):
    embedder = get_embedder()
    embedder.embed_documents(PASSAGES[:1])

    class Other:
        name, dimension = "openai/text-embedding-3-small", embedder.dimension

    assert VectorCache(cache_folder, Other()).get(PASSAGES[:1]) == [None]


def test_a_folder_that_cannot_be_written_still_embeds(settings, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    settings.BOOKCHAT = {**settings.BOOKCHAT, "EMBEDDING_CACHE": str(blocker / "vectors")}
    vectors = get_embedder().embed_documents(PASSAGES)
    assert vectors.shape == (len(PASSAGES), get_embedder().dimension)
