"""Hybrid retrieval: dense candidates from pgvector (cosine, HNSW) and lexical candidates (BM25 over the
Postgres tsvector), fused by a weighted blend of normalised scores (or RRF) into the top k.

Dense search is exact for a book of up to ``vector_index.EXACT_SEARCH_MAX_CHUNKS`` passages (the shared HNSW
index holds every book, and a small book's slice of it is cheaper to scan than to find in it)
and HNSW with iterative scanning above that, in the book's own index once its indexing run has
built it (``ingestion.indexing.vector_index``); with ``VECTOR_STORE=qdrant`` the Qdrant mirror
finds the dense candidates instead (``DenseSearch``), on the same cosine scale. Every candidate
gets both scores (a dense-only candidate is scored lexically and the other way round), so
fusion compares like with like.
The raw cosine of the best candidate is kept apart from the fused score: fused scores are
relative to the pool, while the scope decision needs an absolute measure, in either fusion mode.

The fused pool's best 30 are then re-ordered by the re-ranker (``chat.pipeline.reranking``, unless
``RERANKER=off``); a candidate's ``score`` becomes its probability, the fused score stays in ``fused``.

A question asked in another language than the book's (``language`` not the book's) is searched with its vector
moved towards the book's language (``chat.pipeline.crosslingual``). Its words go to the lexical side as they are:
BM25 can only match the words the book has, which for such a question are its names, numbers, code and the odd
cognate, and where none matches the dense order stands. Searching lexically for the names alone
(``answerability.crosslingual_terms``) was measured and dropped: on docusaurus-docs it found the evidence in the
top five less often in Spanish (0.667 against 0.733) and French (0.633 against 0.767), and as often in Urdu and
Chinese. What must not decide on words, the scope and answerability checks, doesn't (``chat.pipeline.calibration``,
``chat.pipeline.answerability``). The hit@5 such a question loses against its English original is the moved vector's
(the lexical side and the re-ranker add as much to either), and a passage's vector carries across languages less well
than a sentence's: so each candidate's cosine, for fusion and the re-ranker, becomes ``UNIT_WEIGHT`` its best answer
unit's (``chat.pipeline.sentences``) and the rest its own; the scope check still reads the passages' own best
cosine. Measured on docusaurus-docs (es/fr/ur/zh, BENCHMARKS.md "Questions in other languages"): MRR@10 up in every
language (0.602/0.586/0.490/0.599 → 0.647/0.601/0.521/0.619), answer contains 0.50/0.50/0.45/0.50 →
0.50/0.60/0.50/0.55; a weight of 0.5 or 0.75 lifted hit@5 more and hit@1 less, and lost answers; held out
(mdbook-guide) hit@5 the same or better, Chinese answers two fewer.

Selected-text mode: the passage joins the question in both searches, and every candidate's
share of the passage's word 4-grams (``selected_overlap``) adds ``SELECTED_TEXT_BOOST`` times
that share to its fused score, so the chunks that contain the passage come first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from django.db import DatabaseError, connection, transaction
from django.db.models import Q

from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError, ConfigurationError, DeadlineExceeded, NotFound
from chat.pipeline.crosslingual import moved
from chat.pipeline.deadline import Deadline
from chat.pipeline.language import book_language
from chat.pipeline.lexical import SCAN_BUDGET, LexicalResult, bm25_search
from chat.pipeline.reranking import rerank
from chat.pipeline.sentences import RESORT, attach, resort
from chat.pipeline.terms import words
from ingestion.indexing import vector_index
from ingestion.indexing.embedders import check_compatible, get_embedder
from ingestion.indexing.lexicon import stored_statistics
from ingestion.indexing.qdrant import QdrantError, QdrantMirror, get_mirror
from ingestion.models import Book, Chunk, Document

SHINGLE = 4
COVERAGE_CHUNKS = 3
UNIT_WEIGHT = 0.25  # a cross-lingual question: the best answer unit's share of a candidate's cosine


class VectorStoreUnavailable(BookchatError):
    """The configured dense search cannot answer (Qdrant not configured, down, or never synced): a failure of the
    service, not of the request (the API answers 503, ``bookchat.base.errors.failure``)."""

    code = "vector_store_unavailable"


@dataclass
class RetrievedChunk:
    id: str
    document_id: int
    heading_path: str
    anchor: str
    url: str
    text: str
    document_title: str
    document_path: str
    category: str
    dense: float = 0.0  # cosine similarity to the query
    lexical: float = 0.0  # BM25
    score: float = 0.0  # the re-ranker's probability (or the fused score without it), plus any selected-text boost
    selected_overlap: float = 0.0
    fused: float = 0.0  # the fused score, 0–1
    sentence_similarities: list[float] | None = None  # the question's cosine with each unit (``sentences``)

    @property
    def chapter(self) -> str:
        return self.category or self.document_title

    @property
    def section(self) -> str:
        return self.heading_path.rsplit(" > ", 1)[-1] if self.heading_path else self.document_title


@dataclass
class Retrieval:
    query: str
    chunks: list[RetrievedChunk]  # the top k, best first
    best_cosine: float  # highest cosine of any candidate: what the scope decision reads
    lexical_coverage: float = 0.0  # IDF-weighted share of the query's words found in the top chunks
    best_selected_overlap: float = 0.0
    candidates: int = 0
    seconds: float = 0.0
    timings_ms: dict[str, float] = field(default_factory=dict)  # embed, dense, lexical, fusion
    pool: list[RetrievedChunk] = field(default_factory=list)  # every fused candidate, best first
    lexical: LexicalResult = field(default_factory=LexicalResult)
    vector: list[float] | None = None  # the query's embedding (staff answers are matched with it, not embedded again)


def chapter_documents(book: Book, chapter: str) -> list[int]:
    """Ids of the pages a chapter filter names: a category label, a folder, a page path or a page slug."""
    chapter = chapter.strip().strip("/")
    matches = Document.objects.filter(book=book).filter(
        Q(category__iexact=chapter) | Q(path__startswith=f"{chapter}/") | Q(path=chapter)
        | Q(slug=chapter) | Q(title__iexact=chapter)
    )
    ids = list(matches.values_list("id", flat=True))
    if not ids:
        # 404 like an unknown book: the request is well formed, the chapter it names does not exist.
        raise NotFound(f"book {book.slug!r} has no chapter or page {chapter!r}", code="unknown_chapter",
                       field="chapter")
    return ids


def vector_literal(vector) -> str:
    """pgvector's text form of a vector, for raw SQL parameters."""
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


def shingles(text: str, size: int = SHINGLE) -> set[tuple[str, ...]]:
    tokens = words(text)
    if len(tokens) < size:
        return {tuple(tokens)} if tokens else set()
    return {tuple(tokens[i:i + size]) for i in range(len(tokens) - size + 1)}


def _passages(cursor, book_id: int, document_ids, doc_filter: str, params: list, stored: int | None) -> int:
    """How many passages the search covers: the book's stored count when it has one, else counted."""
    if document_ids is None and stored is not None:
        return stored
    cursor.execute(f"SELECT count(*) FROM ingestion_chunk WHERE book_id = %s{doc_filter}", params)
    return cursor.fetchone()[0]


def _dense_candidates(cursor, *, book_id: int, vector, dimensions: int, limit: int,
                      document_ids: list[int] | None, passages: int | None = None) -> dict[str, float]:
    distance, predicate = Chunk.cosine_distance_sql(dimensions)
    doc_filter = " AND document_id = ANY(%s)" if document_ids is not None else ""
    params = [book_id, *([document_ids] if document_ids is not None else [])]
    if _passages(cursor, book_id, document_ids, doc_filter, params, passages) <= vector_index.EXACT_SEARCH_MAX_CHUNKS:
        # A book (or chapter) is a slice of an index shared by every book: for a slice this small an
        # exact scan of its own rows is both faster and exact, where HNSW would wade through the others.
        cursor.execute(
            f"WITH own AS MATERIALIZED (SELECT id, embedding, dimensions FROM ingestion_chunk "
            f"WHERE book_id = %s{doc_filter}) "
            f"SELECT id, {distance} AS dist FROM own WHERE {predicate} ORDER BY dist LIMIT %s",
            [*params, vector, limit],
        )
        return {cid: 1.0 - float(dist) for cid, dist in cursor.fetchall()}
    # A big book: HNSW (its own index, which the planner finds from the literal book id), scanning on until
    # enough of this book's (or chapter's) rows are found.
    cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    cursor.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(max(40, min(1000, limit * 2)))])
    cursor.execute(
        f"SELECT id, dist FROM (SELECT id, {distance} AS dist FROM ingestion_chunk "
        f"WHERE {predicate} AND book_id = %s{doc_filter} ORDER BY dist LIMIT %s) found ORDER BY dist",
        [vector, *params, limit],
    )
    return {cid: 1.0 - float(dist) for cid, dist in cursor.fetchall()}


class DenseSearch:
    """Where dense candidates come from: ``{chunk id: cosine similarity}`` of the ``limit`` nearest chunks."""

    name = ""

    def candidates(self, cursor, *, book: Book, vector: list[float], limit: int, document_ids: list[int] | None,
                   seconds: float, literal: str | None = None, passages: int | None = None) -> dict[str, float]:
        """``literal``: the vector already in pgvector's text form, when the caller has it; ``passages``: the
        book's stored passage count, when the caller has read it."""
        raise NotImplementedError


class PgvectorSearch(DenseSearch):
    name = "pgvector"

    def candidates(self, cursor, *, book, vector, limit, document_ids, seconds, literal=None, passages=None):
        return _dense_candidates(cursor, book_id=book.pk, vector=literal or vector_literal(vector),
                                 dimensions=book.embedder_dimension, limit=limit, document_ids=document_ids,
                                 passages=passages)


class QdrantSearch(DenseSearch):
    name = "qdrant"

    def __init__(self, mirror: QdrantMirror):
        self.mirror = mirror

    def candidates(self, cursor, *, book, vector, limit, document_ids, seconds, literal=None, passages=None):
        paths = None
        if document_ids is not None:  # the chapter filter, resolved once by chapter_documents()
            paths = list(Document.objects.filter(id__in=document_ids).values_list("path", flat=True))
        try:
            hits = self.mirror.search(book=book.slug, dimensions=book.embedder_dimension, vector=vector, limit=limit,
                                      documents=paths, timeout_seconds=seconds)
        except QdrantError as exc:
            raise VectorStoreUnavailable(f"dense search on Qdrant failed: {exc.message}") from exc
        # The mirror may lag behind Postgres (a page removed while Qdrant was down): keep the chunks that exist.
        ids = [cid for cid, _ in hits]
        doc_filter = " AND document_id = ANY(%s)" if document_ids is not None else ""
        cursor.execute(f"SELECT id FROM ingestion_chunk WHERE id = ANY(%s) AND book_id = %s{doc_filter}",
                       [ids, book.pk, *([document_ids] if document_ids is not None else [])])
        known = {row[0] for row in cursor.fetchall()}
        return {cid: score for cid, score in hits if cid in known}


def get_dense_search() -> DenseSearch:
    """The dense search ``BOOKCHAT_VECTOR_STORE`` names."""
    store = setting("VECTOR_STORE").strip().lower()
    if store == "pgvector":
        return PgvectorSearch()
    if store == "qdrant":
        mirror = get_mirror()
        if mirror is None:
            raise VectorStoreUnavailable("BOOKCHAT_VECTOR_STORE=qdrant needs BOOKCHAT_QDRANT_URL (a Qdrant server) "
                                         "or BOOKCHAT_QDRANT_PATH (local mode)", code="configuration")
        return QdrantSearch(mirror)
    raise VectorStoreUnavailable(f"BOOKCHAT_VECTOR_STORE={store!r} is not 'pgvector' or 'qdrant'",
                                 code="configuration")


def _candidate_rows(cursor, *, ids: list[str], vector: str, dimensions: int) -> dict[str, RetrievedChunk]:
    """The candidates with their pages, each with its cosine to the query (in ``dense``), in one query."""
    if not ids:
        return {}
    distance, _ = Chunk.cosine_distance_sql(dimensions)
    cursor.execute(
        f"SELECT c.id, c.document_id, c.heading_path, c.anchor, c.url, c.text, d.title, d.path, d.category, "
        f"1 - {distance.replace('embedding', 'c.embedding')} "
        f"FROM ingestion_chunk c JOIN ingestion_document d ON d.id = c.document_id WHERE c.id = ANY(%s)",
        [vector, ids],
    )
    return {row[0]: RetrievedChunk(*row[:9], dense=float(row[9])) for row in cursor.fetchall()}


def fuse(dense: dict[str, float], lexical: dict[str, float], *, mode: str | None = None) -> dict[str, float]:
    """Fused 0–1 scores of the union of candidates (both dicts should score every candidate)."""
    mode = mode or setting("FUSION")
    ids = set(dense) | set(lexical)
    if not ids:
        return {}
    if mode == "rrf":
        k = setting("RRF_K")
        dense_rank = {cid: r for r, cid in enumerate(sorted(dense, key=dense.get, reverse=True), 1)}
        lex_rank = {cid: r for r, cid in enumerate(sorted(lexical, key=lexical.get, reverse=True), 1)
                    if lexical[cid] > 0}
        raw = {cid: (1 / (k + dense_rank[cid]) if cid in dense_rank else 0.0)
               + (1 / (k + lex_rank[cid]) if cid in lex_rank else 0.0) for cid in ids}
        top = 2 / (k + 1)
        return {cid: value / top for cid, value in raw.items()}
    if mode != "weighted":
        raise ConfigurationError(f"BOOKCHAT_FUSION={mode!r} is not 'weighted' or 'rrf'", code="bad_setting")
    low, high = (min(dense.values()), max(dense.values())) if dense else (0.0, 0.0)
    spread = (high - low) or 1.0
    lex_high = max(lexical.values(), default=0.0) or 1.0
    wd, wl = setting("DENSE_WEIGHT"), setting("LEXICAL_WEIGHT")
    total = (wd + wl) or 1.0
    return {cid: (wd * ((dense[cid] - low) / spread if cid in dense else 0.0)
                  + wl * (lexical.get(cid, 0.0) / lex_high)) / total for cid in ids}


def retrieve(*, book: Book, question: str, selected_text: str = "", chapter: str | None = None,
             top_k: int | None = None, deadline: Deadline | None = None, query_vector=None,
             stage_seconds: float | None = None, scan_budget: int = SCAN_BUDGET,
             language: str | None = None) -> Retrieval:
    """The ``top_k`` chunks of ``book`` that best answer ``question`` (about ``selected_text``, if given).
    ``query_vector`` skips embedding the query when the caller already has its vector; ``stage_seconds``
    replaces ``RETRIEVAL_SECONDS`` as this stage's share of the deadline (for batch callers like calibration);
    ``scan_budget`` bounds the lexical candidate scan (``lexical.SCAN_BUDGET``); ``language``: the question's, when
    known; in another language than the book's, its vector is moved to the book's language.

    The steps: embed the query, search both ways (``_search``), fuse the scores (``_fused``), order the pool
    (``_ranked``: selected-text boost, re-ranker, sentence re-sort), keep the first ``top_k``."""
    started = time.monotonic()
    deadline = deadline or Deadline()
    top_k = top_k or setting("TOP_K")
    dense_search = get_dense_search()
    embedder = get_embedder()
    check_compatible(book, embedder)
    document_ids = chapter_documents(book, chapter) if chapter else None
    query = f"{question}\n\n{selected_text}" if selected_text else question
    written_in = book_language(book)
    crosslingual = bool(language) and language != written_in
    budget = deadline.stage_budget(setting("RETRIEVAL_SECONDS") if stage_seconds is None else stage_seconds)
    stage_end = time.monotonic() + budget
    deadline.check("retrieval")
    clock = _StageClock()
    vector = embedder.embed_query(query) if query_vector is None else query_vector
    if crosslingual and query_vector is None:
        vector = moved(vector, language, written_in)
    clock.mark("embed")
    found = _search(dense_search, book=book, query=query, vector=vector,
                    pool=max(setting("CANDIDATE_POOL"), top_k), document_ids=document_ids, stage_end=stage_end,
                    scan_budget=scan_budget, clock=clock)
    best_cosine = max(found.dense.values(), default=0.0)  # the scope check reads the passages' own cosine
    if crosslingual:
        attach(list(found.rows.values()), vector, embedder_name=book.embedder_name)
        found.dense.update(with_best_unit(found.dense, found.rows.values()))
    candidates = _fused(found)
    best_overlap = _selected_overlaps(candidates, selected_text)
    fused_top, candidates = _ranked(candidates, found.lexical, question=question, selected=bool(selected_text),
                                    vector=vector, embedder_name=book.embedder_name)
    top = candidates[:top_k]
    attach(top[RESORT:], vector, embedder_name=book.embedder_name)
    clock.mark("fusion")  # fusion includes the re-ranker and the sentence re-sort
    return Retrieval(query=query, chunks=top, best_cosine=best_cosine,
                     lexical_coverage=found.lexical.coverage(fused_top), best_selected_overlap=best_overlap,
                     candidates=len(candidates), seconds=time.monotonic() - started, pool=candidates,
                     timings_ms=clock.timings_ms, lexical=found.lexical, vector=[float(x) for x in vector])


OUT_OF_TIME = "bookchat ran out of time while searching the book; try again"


class _StageClock:
    """The time each stage took, from one mark to the next, in milliseconds."""

    def __init__(self):
        self.last = time.monotonic()
        self.timings_ms: dict[str, float] = {}

    def mark(self, stage: str) -> None:
        now = time.monotonic()
        self.timings_ms[stage], self.last = round((now - self.last) * 1000, 2), now


@dataclass
class _Found:
    """What both searches found: cosines and BM25 scores by chunk id, and the candidates' rows."""

    dense: dict[str, float]
    lexical: LexicalResult
    rows: dict[str, RetrievedChunk]


def _search(dense_search: DenseSearch, *, book: Book, query: str, vector, pool: int, document_ids,
            stage_end: float, scan_budget: int, clock: _StageClock) -> _Found:
    """Dense and lexical candidates in one transaction whose statement timeout is what is left of the stage."""
    literal = vector_literal(vector)
    timeout_ms = int((stage_end - time.monotonic()) * 1000)
    if timeout_ms <= 0:
        raise DeadlineExceeded(OUT_OF_TIME)
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            stats = stored_statistics(cursor, book.pk, timeout_ms=timeout_ms)  # and the transaction's timeout
            dense = dense_search.candidates(cursor, book=book, vector=vector, literal=literal, limit=pool,
                                            document_ids=document_ids, seconds=stage_end - time.monotonic(),
                                            passages=stats[0] if stats else None)
            clock.mark("dense")
            lexical = bm25_search(book_id=book.pk, text=query, limit=pool, document_ids=document_ids,
                                  extra_ids=list(dense), stats=stats, scan_budget=scan_budget)
            clock.mark("lexical")
            rows = _candidate_rows(cursor, ids=list(set(dense) | set(lexical.scores)), vector=literal,
                                   dimensions=book.embedder_dimension)
    except DatabaseError as exc:
        if "statement timeout" in str(exc) or "canceling statement" in str(exc):
            raise DeadlineExceeded(OUT_OF_TIME) from exc
        raise
    if time.monotonic() > stage_end:
        raise DeadlineExceeded(OUT_OF_TIME)
    for chunk in rows.values():  # a lexical-only candidate gets its cosine too, so fusion compares like with like
        dense.setdefault(chunk.id, chunk.dense)
    return _Found(dense, lexical, rows)


def with_best_unit(dense: dict[str, float], chunks) -> dict[str, float]:
    """The cosines of ``chunks`` that have their units' (``sentence_similarities``) blended with their best unit's:
    ``(1 − UNIT_WEIGHT) × passage + UNIT_WEIGHT × best unit`` (a question in another language than the book's,
    module docstring)."""
    return {c.id: (1 - UNIT_WEIGHT) * dense[c.id] + UNIT_WEIGHT * max(c.sentence_similarities)
            for c in chunks if c.sentence_similarities and c.id in dense}


def _fused(found: _Found) -> list[RetrievedChunk]:
    """The candidates with their dense, lexical and fused scores, in fusion's order of ids (not yet sorted)."""
    candidates = []
    for cid, score in fuse(found.dense, found.lexical.scores).items():
        if (chunk := found.rows.get(cid)) is not None:
            chunk.dense, chunk.lexical = found.dense[cid], found.lexical.scores.get(cid, 0.0)
            chunk.score = chunk.fused = score
            candidates.append(chunk)
    return candidates


def _selected_overlaps(candidates: list[RetrievedChunk], selected_text: str) -> float:
    """Each candidate's share of the selected passage's word 4-grams (``selected_overlap``); the best share."""
    if not selected_text:
        return 0.0
    passage = shingles(selected_text)
    for candidate in candidates:
        candidate.selected_overlap = len(passage & shingles(candidate.text)) / len(passage) if passage else 0.0
    return max((c.selected_overlap for c in candidates), default=0.0)


def _ranked(candidates: list[RetrievedChunk], lexical: LexicalResult, *, question: str, selected: bool, vector,
            embedder_name: str) -> tuple[list[str], list[RetrievedChunk]]:
    """The fused order's first ``COVERAGE_CHUNKS`` ids (what the scope score's coverage reads: the re-ranker lifts
    lexical matches, which would lift off-topic questions' coverage, and so the threshold, more than on-topic
    ones'), and the pool in its final order. The selected-text boost orders the fused pool (so the re-ranker sees
    the passage's own chunks) and is added again to the re-ranked scores (so they stay first)."""
    boost = setting("SELECTED_TEXT_BOOST")
    candidates.sort(key=lambda c: (-(c.score + boost * c.selected_overlap), -c.dense, c.id))
    fused_top = [c.id for c in candidates[:COVERAGE_CHUNKS]]
    if setting("RERANKER") == "features":
        candidates = rerank(candidates, lexical, question=question)
    if selected:
        for candidate in candidates:
            candidate.score += boost * candidate.selected_overlap
        candidates.sort(key=lambda c: (-c.score, -c.dense, c.id))
    return fused_top, resort(candidates, vector, embedder_name=embedder_name)


@dataclass(frozen=True)
class Suggestion:
    """A section offered instead of an answer (``chat.pipeline.answers.Answer.suggestions``): a link, not a
    citation."""

    title: str
    heading_path: str
    url: str


def nearest_sections(retrieval: Retrieval, count: int | None = None, *, by_rank: bool = False) -> list[Suggestion]:
    """The closest distinct sections of a retrieval, as suggestions: by cosine
    (a question the book doesn't cover: what is nearest in meaning), or ``by_rank``, in the answer's order (a
    question it may answer: the passages it would have been answered from come first)."""
    count = setting("SCOPE_SUGGESTIONS") if count is None else count
    seen, out = set(), []
    if by_rank:
        shown = {c.id for c in retrieval.chunks}
        ranked = retrieval.chunks + [c for c in retrieval.pool if c.id not in shown]
    else:
        ranked = sorted(retrieval.pool, key=lambda c: -c.dense)
    for chunk in ranked:
        key = (chunk.document_id, chunk.anchor)
        if key in seen:
            continue
        seen.add(key)
        out.append(Suggestion(title=chunk.section, heading_path=chunk.heading_path, url=chunk.url))
        if len(out) == count:
            break
    return out
