"""Every real corpus in ../shared/data ingests cleanly, re-ingests for free, and chunks well.

The corpora with questions (``EMBEDDED_CORPORA``) are ingested for real once per session and
shared with the answering tests: part of each (``SESSION_PAGES``: two of squad2-dev's five articles,
the docusaurus-docs pages its first questions cite). The embedder indexes only 4–6 passages a second here, so the
corpora whole and the two textbooks (2,000 more passages, ~7 minutes) are checked without embedding, with the drills
(`make drills`): a dry-run ingest (every file read, parsed, chunked and counted, nothing embedded) and the chunks the
chunker makes of each page, measured with the embedder's own token counter."""

from __future__ import annotations

import functools
import json

import pytest
from django.db.models import Avg, Count, Max

from ingestion.indexing.embedders import get_embedder
from ingestion.models import Chunk
from tests.conftest import CORPORA, EMBEDDED_CORPORA, run_command
from tests.support.shared_data import SESSION_PAGES, shared_corpus

pytestmark = [pytest.mark.django_db, pytest.mark.needs("shared-data"), pytest.mark.slow]


@pytest.mark.parametrize("name", EMBEDDED_CORPORA)
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


@pytest.mark.parametrize("name", EMBEDDED_CORPORA)
def test_reingesting_a_corpus_embeds_nothing(ingest_corpus, name):
    run = ingest_corpus(name)
    code, out, _ = run_command("ingest", str(run.path), "--book", name, "--json")
    report = json.loads(out)
    assert code == 0 and report["errors"] == []
    assert report["chunks_embedded"] == 0 and report["chunks_added"] == 0
    assert report["files_unchanged"] == report["files_seen"] - report["files_skipped"]


@functools.cache
def fresh_chunks(name: str) -> list[tuple[str, str, int]]:
    """A corpus chunked without storing it: parsed and chunked once for the tests that read it."""
    from bookchat.base.conf import setting
    from ingestion.indexing.chunking import Chunker, ChunkingOptions
    from ingestion.reading.discovery import discover, read_source
    from ingestion.reading.docusaurus import category_label_with_issue
    from ingestion.reading.parsing import parse_document

    embedder = get_embedder()
    root = shared_corpus(name)
    chunker = Chunker(embedder.count_tokens, ChunkingOptions(
        target_tokens=setting("CHUNK_TARGET_TOKENS"), min_tokens=setting("CHUNK_MIN_TOKENS"),
        overlap_tokens=setting("CHUNK_OVERLAP_TOKENS"), max_tokens=embedder.max_input_tokens))
    out = []
    for file in discover(root).files:
        source = read_source(file, max_bytes=setting("MAX_FILE_BYTES"))
        if not source.text.strip():
            continue
        category, _ = category_label_with_issue(root, file.rel_path.rpartition("/")[0])
        parsed = parse_document(source.text, rel_path=file.rel_path, category=category)
        out += [(d.heading_path, d.text, d.token_count) for d in chunker.chunk(parsed)]
    return out


# The checks of whole corpora, most of them never embedded (dry runs, every chunk the chunker makes: ~45 s): `make
# drills`, so that make test stays under 10 minutes.
@pytest.mark.drill
@pytest.mark.parametrize("name", [c for c in CORPORA if c not in EMBEDDED_CORPORA or c in SESSION_PAGES])
def test_dry_run_of_a_corpus_not_embedded_whole_reads_every_file_without_errors(name):
    # A book name of its own: the session may be ingesting part of the corpus as ``name`` meanwhile (its lock).
    code, out, _ = run_command("ingest", str(shared_corpus(name)), "--book", f"{name}-whole", "--dry-run", "--json")
    report = json.loads(out)
    assert code == 0, report["errors"]
    assert report["errors"] == [] and report["files_failed"] == 0
    pages = [p for p in shared_corpus(name).rglob("*.md*") if p.suffix in (".md", ".mdx") and p.name[0] != "_"]
    assert report["files_indexed"] >= min(10, len(pages)) and report["chunks_added"] > 100
    assert 0 < report["chunks_embedded"] <= report["chunks_added"]  # what a real run would embed


@pytest.mark.drill
@pytest.mark.parametrize("name", CORPORA)
def test_every_chunk_fits_the_embedders_window(name):
    embedder = get_embedder()
    chunks = fresh_chunks(name)
    assert chunks
    from ingestion.indexing.chunking import embedding_text

    for heading_path, text, tokens in chunks:
        assert tokens <= embedder.max_input_tokens, heading_path
        if "](" not in text:  # stored links are rewritten to section URLs after embedding (ingestion/reading/links.py)
            assert embedder.count_tokens(embedding_text(heading_path, text)) == tokens


@pytest.mark.drill
@pytest.mark.parametrize("name", CORPORA)
def test_no_chunk_is_a_heading_alone(name):
    embedder = get_embedder()
    texts = [text for _, text, _ in fresh_chunks(name)]
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
