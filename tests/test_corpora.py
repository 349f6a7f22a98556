"""Every real corpus in ../shared/data ingests cleanly, re-ingests for free, and chunks well.

Each corpus is ingested once per session (the embedder indexes ~5 passages a second)."""

from __future__ import annotations

import pytest
from django.db.models import Avg, Count, Max

from ingestion.embedders import get_embedder
from ingestion.models import Chunk
from tests.conftest import CORPORA, run_command
from tests.support.shared_data import shared_corpus

pytestmark = [pytest.mark.django_db, pytest.mark.shared_data, pytest.mark.slow]


@pytest.mark.parametrize("name", CORPORA)
def test_corpus_ingests_without_errors(ingest_corpus, name):
    run = ingest_corpus(name)
    assert run.exit_code == 0, run.report["errors"]
    assert run.report["errors"] == []
    assert run.report["files_failed"] == 0
    stats = Chunk.objects.filter(book__slug=name).aggregate(n=Count("id"), mean=Avg("token_count"),
                                                            most=Max("token_count"))
    assert stats["n"] > 0
    print(f"\n{name}: {stats['n']} chunks, {stats['mean']:.0f} mean / {stats['most']} max tokens, "
          f"{run.report['files_indexed']} pages, ingested in {run.seconds:.1f} s")


@pytest.mark.parametrize("name", CORPORA)
def test_reingesting_a_corpus_embeds_nothing(ingest_corpus, name):
    import json

    ingest_corpus(name)
    code, out, _ = run_command("ingest", str(shared_corpus(name)), "--book", name, "--json")
    report = json.loads(out)
    assert code == 0 and report["errors"] == []
    assert report["chunks_embedded"] == 0 and report["chunks_added"] == 0
    assert report["files_unchanged"] == report["files_seen"] - report["files_skipped"]


@pytest.mark.parametrize("name", CORPORA)
def test_every_chunk_fits_the_embedders_window(ingest_corpus, name):
    ingest_corpus(name)
    embedder = get_embedder()
    chunks = list(Chunk.objects.filter(book__slug=name).values_list("heading_path", "text", "token_count"))
    from ingestion.chunking import embedding_text

    for heading_path, text, tokens in chunks:
        actual = embedder.count_tokens(embedding_text(heading_path, text))
        assert actual == tokens
        assert actual <= embedder.max_input_tokens, heading_path


@pytest.mark.parametrize("name", CORPORA)
def test_no_chunk_is_a_heading_alone(ingest_corpus, name):
    ingest_corpus(name)
    embedder = get_embedder()
    texts = list(Chunk.objects.filter(book__slug=name).values_list("text", flat=True))
    base = embedder.count_tokens("")
    tiny = [t for t in texts if embedder.count_tokens(t) - base < 8]
    assert not [t for t in texts if not t.strip() or t.lstrip().startswith("#") and "\n" not in t.strip()]
    assert len(tiny) <= max(1, len(texts) // 100), tiny[:10]


def test_docusaurus_anchors_are_honoured(ingest_corpus):
    ingest_corpus("docusaurus-docs")
    chunk = Chunk.objects.filter(book__slug="docusaurus-docs", document__path="cli.mdx",
                                 text__contains="Clear a Docusaurus site's generated assets").first()
    assert chunk is not None
    assert chunk.url.endswith("/cli#docusaurus-clear-sitedir")
