"""Scale: synthetic books of N chunks made from the real corpora's chunks, so a big book costs no embedding.

A book of N chunks holds squad2-dev's real pages and chunks (so its questions have their real
evidence) plus filler: copies of the other corpora's chunks with their vectors moved by a
little Gaussian noise and re-normalised (their text is kept, so lexical search sees real
text too). Retrieval is then timed and graded (hit@5) on squad2-dev questions, with pgvector
and, when asked, with the Qdrant mirror (local mode) as the dense store.
"""

from __future__ import annotations

import hashlib
import tempfile
import time

import numpy as np
from django.db import connection, transaction
from django.test.utils import override_settings

from bench.stats import summary
from bookchat.base.errors import BookchatError
from chat.channels.serializers import validate_ask
from chat.pipeline.answering import answer_question
from chat.pipeline.retrieval import retrieve
from chat.quality.evaluation import _hit_rank
from ingestion.indexing.lexicon import refresh_lexicon
from ingestion.indexing.vector_index import sync_book_index
from ingestion.models import Book, Chunk, Document

NOISE = 0.02  # per-dimension standard deviation before re-normalising (cosine to the original ≈ 0.9)
BATCH = 1000


def build_book(size: int, *, source: str = "squad2-dev", log) -> Book:
    slug = f"bench-scale-{size}"
    Book.objects.filter(slug=slug).delete()
    real = Book.objects.get(slug=source)
    book = Book.objects.create(slug=slug, title=f"Synthetic {size}", embedder_name=real.embedder_name,
                               embedder_dimension=real.embedder_dimension)
    documents = {}
    for doc in Document.objects.filter(book=real):
        documents[doc.pk] = Document.objects.create(book=book, path=doc.path, title=doc.title, slug=doc.slug,
                                                    url=doc.url, category=doc.category, content_hash=doc.content_hash)
    fields = ["heading_path", "anchor", "url", "text", "char_start", "char_end", "line_start", "line_end",
              "token_count", "embedding_key", "dimensions"]
    rows = []
    for n, chunk in enumerate(Chunk.objects.filter(book=real).order_by("document_id", "ordinal")):
        rows.append(Chunk(id=_id(slug, "real", n), book=book, document=documents[chunk.document_id], ordinal=n,
                          embedding=chunk.embedding, **{f: getattr(chunk, f) for f in fields}))
    filler_pool = list(filler_chunks(real).values(*fields, "embedding"))
    if not filler_pool:
        raise RuntimeError("no other book is indexed to make filler from (index one, e.g. the bundled docs/)")
    rng = np.random.default_rng(size)
    needed = max(0, size - len(rows))
    per_page = 500
    filler_docs = []
    for page in range(0, needed, per_page):
        filler_docs.append(Document.objects.create(book=book, path=f"filler/{page // per_page:04d}.md",
                                                   title=f"Filler {page // per_page}", content_hash="synthetic"))
    log(f"  building a {size:,}-chunk book ({len(rows)} real, {needed:,} synthetic) …")
    started = time.monotonic()
    Chunk.objects.bulk_create(rows, batch_size=BATCH)
    for start in range(0, needed, BATCH):
        batch = []
        for i in range(start, min(start + BATCH, needed)):
            template = filler_pool[i % len(filler_pool)]
            vector = np.asarray(template["embedding"], dtype=np.float32)
            vector = vector + rng.normal(0, NOISE, vector.shape).astype(np.float32)
            vector /= np.linalg.norm(vector)
            values = {f: template[f] for f in fields}
            batch.append(Chunk(id=_id(slug, "filler", i), book=book, document=filler_docs[i // per_page],
                               ordinal=i % per_page, embedding=vector, **values))
        with transaction.atomic():
            Chunk.objects.bulk_create(batch, batch_size=BATCH)
    log(f"  … stored in {time.monotonic() - started:.0f} s")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE ingestion_chunk")
    refresh_lexicon(book)  # as an indexing run would
    started = time.monotonic()
    if sync_book_index(book, size):
        log(f"  its own HNSW index built in {time.monotonic() - started:.0f} s")
    return book


def filler_chunks(real: Book):
    """The chunks filler is copied from: every other real book's of the same vector size, in the order of their
    ids, so that the same books make the same synthetic book (in the table's own order, deletes and a REINDEX
    change which template each filler chunk copies: hit@5 at 50,000 read 0.995 in one run and 0.975 in the next
    two with retrieval unchanged; in id order it has read 0.975 run after run)."""
    return (Chunk.objects.exclude(book__slug__startswith="bench-").exclude(book=real)
            .filter(dimensions=real.embedder_dimension).order_by("id"))


def _id(*parts) -> str:
    return hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:40]


def hnsw_build_seconds(book: Book) -> tuple[float, float]:
    """Seconds to build an HNSW index over the book's vectors alone (a scratch table), and its size in MB."""
    dims = book.embedder_dimension
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"CREATE TEMP TABLE bench_vectors ON COMMIT DROP AS SELECT embedding::vector({dims}) AS e "
                       f"FROM ingestion_chunk WHERE book_id = %s", [book.pk])
        started = time.monotonic()
        cursor.execute("CREATE INDEX bench_vectors_hnsw ON bench_vectors USING hnsw (e vector_cosine_ops)")
        seconds = time.monotonic() - started
        cursor.execute("SELECT pg_relation_size('bench_vectors_hnsw')")
        size = cursor.fetchone()[0] / 1e6
    return seconds, size


def disk_per_1k_mb(book: Book, hnsw_mb: float) -> float:
    """Row bytes (text, vector, tsvector) per 1,000 chunks, plus the indexes a table of the book's rows alone
    would have: the chunk table's GIN and B-tree indexes built again on a scratch copy, and ``hnsw_mb`` (the
    HNSW index built on its vectors alone, ``hnsw_build_seconds``). The live table's own indexes are shared by
    every book and keep the space of deleted ones until a REINDEX, so a share of them overstated a small book
    on a development database (38 MB per 1k chunks instead of 6.6)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT count(*), sum(pg_column_size(c.*)) FROM ingestion_chunk c WHERE book_id = %s",
                       [book.pk])
        count, row_bytes = cursor.fetchone()
        if not count:
            return 0.0
        cursor.execute("CREATE TEMP TABLE bench_rows ON COMMIT DROP AS SELECT * FROM ingestion_chunk "
                       "WHERE book_id = %s", [book.pk])
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() "
                       "AND tablename = 'ingestion_chunk' AND indexdef NOT LIKE '% USING hnsw %'")
        index_bytes = 0.0
        for n, (definition,) in enumerate(cursor.fetchall()):
            columns = definition.split(" USING ", 1)[1]
            cursor.execute(f"CREATE INDEX bench_rows_{n} ON bench_rows USING {columns}")
            cursor.execute(f"SELECT pg_relation_size('bench_rows_{n}')")
            index_bytes += cursor.fetchone()[0]
        cursor.execute("DROP TABLE bench_rows")  # inside an outer transaction (a test's), commit is far off
    return (float(row_bytes or 0) + index_bytes + hnsw_mb * 1e6) / count * 1000 / 1e6


def measure(book: Book, questions, *, store: str = "pgvector", answers: bool = True) -> dict:
    """Retrieval latency and hit@5 on the book, and (``answers``) the whole answer in-process."""
    latencies, hits, answered, errors = [], [], [], 0
    for question in questions:
        started = time.perf_counter()
        try:
            found = retrieve(book=book, question=question.question)
        except BookchatError:  # e.g. past the deadline: counted, and graded as a miss
            errors += 1
            hits.append(False)
            continue
        latencies.append((time.perf_counter() - started) * 1000)
        hits.append(_hit_rank([c.text for c in found.chunks], question.evidence) is not None)
        if answers:
            started = time.perf_counter()
            answer_question(validate_ask({"question": question.question, "book": book.slug}, channel="bench"))
            answered.append((time.perf_counter() - started) * 1000)
    answer = summary(answered)
    return {"store": store, **summary(latencies), "hit_at_5": sum(hits) / len(hits) if hits else None,
            "answer_p50": answer["p50"], "answer_p95": answer["p95"], "errors": errors}


def measure_qdrant(book: Book, questions, *, log) -> dict:
    from ingestion.indexing.qdrant import close_client
    from ingestion.indexing.qdrant_sync import sync_mirror

    with tempfile.TemporaryDirectory(prefix="bookchat-bench-qdrant-") as path:
        base = {**setting_dict(), "QDRANT_PATH": path, "QDRANT_URL": ""}
        with override_settings(BOOKCHAT=base):
            log("  mirroring it to Qdrant (local mode) …")
            started = time.monotonic()
            sync_mirror(book=book.slug)
            sync_seconds = time.monotonic() - started
            with override_settings(BOOKCHAT={**base, "VECTOR_STORE": "qdrant"}):
                result = measure(book, questions, store="qdrant (local mode)")
            close_client()
    return {**result, "sync_seconds": sync_seconds}


def setting_dict() -> dict:
    from django.conf import settings

    return dict(settings.BOOKCHAT)

