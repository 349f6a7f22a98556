"""Ingestion: pipeline throughput against the embedder's raw throughput on the same texts, then
re-indexing an unchanged book and a book with one edited page."""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from pathlib import Path

from bookchat.base.conf import setting
from ingestion.indexing.chunking import embedding_text
from ingestion.indexing.embedders import get_embedder
from ingestion.indexing.ingesting import index_book
from ingestion.models import BOOK_SLUG_LENGTH, Book, Chunk

RAW_SAMPLE = 320  # passages embedded raw to measure the embedder alone


def bench_corpus(name: str, docs: Path, *, repeats: int, log) -> dict:
    slug = f"bench-{name}"[:BOOK_SLUG_LENGTH]
    Book.objects.filter(slug=slug).delete()
    with tempfile.TemporaryDirectory(prefix="bookchat-bench-") as tmp:
        folder = Path(tmp) / "docs"
        shutil.copytree(docs, folder)
        log(f"  indexing {name} from scratch …")
        started = time.monotonic()
        # reindex: embed every passage, though another book of the database holds the same texts' vectors.
        first = index_book(path=folder, book_slug=slug, trigger="bench", reindex=True)
        first_seconds = time.monotonic() - started
        chunks = Chunk.objects.filter(book__slug=slug)
        texts = [embedding_text(h, t) for h, t in chunks.values_list("heading_path", "text")]
        raw = raw_throughput(texts, log=log)
        unchanged = []
        for _ in range(repeats):
            started = time.monotonic()
            again = index_book(path=folder, book_slug=slug, trigger="bench")
            unchanged.append(time.monotonic() - started)
            assert again.chunks_embedded == 0, "an unchanged book embedded passages"
        edited_file = max(folder.rglob("*.md*"), key=lambda p: p.stat().st_size)
        edited_file.write_text(edited_file.read_text(encoding="utf-8") + "\n\n## Benchmark edit\n\nOne new "
                               "paragraph added by the benchmark to measure re-indexing one edited page.\n",
                               encoding="utf-8")
        started = time.monotonic()
        edited = index_book(path=folder, book_slug=slug, trigger="bench")
        edited_seconds = time.monotonic() - started
    total = first.chunks_added
    Book.objects.filter(slug=slug).delete()
    pipeline_chunks_s = first.chunks_embedded / first_seconds if first_seconds else 0.0
    pipeline_tokens_s = first.tokens / first_seconds if first_seconds else 0.0
    return {
        "corpus": name, "pages": first.files_indexed, "chunks": total, "embedded": first.chunks_embedded,
        "tokens": first.tokens, "seconds": first_seconds, "embed_seconds": first.embed_seconds,
        "chunks_per_s": pipeline_chunks_s, "tokens_per_s": pipeline_tokens_s,
        "raw_chunks_per_s": raw["chunks_per_s"], "raw_tokens_per_s": raw["tokens_per_s"],
        "ratio_tokens": pipeline_tokens_s / raw["tokens_per_s"] if raw["tokens_per_s"] else None,
        "ratio_chunks": pipeline_chunks_s / raw["chunks_per_s"] if raw["chunks_per_s"] else None,
        "unchanged_seconds": unchanged, "edited_seconds": edited_seconds, "edited_embedded": edited.chunks_embedded,
        "edited_file": edited_file.name,
        # Of the first run's seconds: what chat does once the passages are stored (chat/receivers.py).
        "sentence_vectors_seconds": first.after.get("sentence_vectors", {}).get("seconds"),
        "calibration_seconds": first.after.get("calibration", {}).get("seconds"),
    }


def raw_throughput(texts: list[str], *, log) -> dict:
    """The embedder alone on (a sample of) the same passages, in the same batch size."""
    embedder = get_embedder()
    sample = texts if len(texts) <= RAW_SAMPLE else random.Random(7).sample(texts, RAW_SAMPLE)
    tokens = sum(embedder.count_tokens(t) for t in sample)
    log(f"  embedding {len(sample)} of its passages raw …")
    started = time.monotonic()
    embedder.embed_documents(sample, batch_size=setting("EMBED_BATCH_SIZE"))
    seconds = time.monotonic() - started
    return {"chunks_per_s": len(sample) / seconds, "tokens_per_s": tokens / seconds, "sample": len(sample)}
