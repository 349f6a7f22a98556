"""Sentence vectors: every answer unit of a passage (a sentence, a list item, a table row, as the extractive
composer cuts them) embedded on its own when the book is indexed, and read back for the passages an answer is
made from.

A passage's vector says what the whole passage is about; which of its sentences answers the
question it can't say, and the lexical features only see the words the question shares with
them ("turn off the next link" against "disable … with ``pagination_next: null``"). With
each unit's vector stored, two stages read the cosine between the question and each unit:

- ``resort`` gives the best ``RESORT`` passages a new probability of holding the answer, from the
  re-ranker's (its logit) and how far their best unit's cosine falls below the best one's (a
  logistic model of two weights), and orders them by it;
- the extractive composer scores units with it (``chat/pipeline/extractive.py``).

Index side: ``fill_book`` runs as a task after every indexing run that wrote (``chat/tasks.py``). It embeds only
the passages whose stored ``key`` (embedder + the unit texts) no longer matches, reusing the
vectors of any passage with the same key (editions of a site, a book indexed twice), and
commits every ``WRITE_BATCH`` passages, so an interrupted run keeps what it made. A failure
to embed is logged, and the book answers without them (a passage without current vectors is
simply not re-sorted or scored by them).

Decisions:
- Made at indexing, not per question: the units of five passages are ~30 short texts, more than a
  question's time allows embedding; at indexing they cost about 0.6× the passages' own embedding, once
  (BENCHMARKS.md has the figures).
- Stored as float16 (768 bytes a unit with 384 dimensions), in a table of chat's own: the
  units are the composer's, so ingestion knows nothing of them.
- ``RESORT`` = 5, the passages a plain answer is made from. The weights are fitted by
  ``bench/fit_sentences.py`` on squad2-dev and docusaurus-docs ``questions.jsonl`` (each set
  weighing the same) and checked on ``questions-2.jsonl``; BENCHMARKS.md has the figures.
"""

from __future__ import annotations

import hashlib
import logging
import time
from functools import lru_cache

import numpy as np
from django.db import transaction

from bookchat.base.conf import setting
from bookchat.base.errors import BookchatError
from chat.models import SentenceVectors
from chat.pipeline.scoring import cosine_gap, logistic, logit, order_head_over_tail
from chat.pipeline.units import answer_units, blocks_of
from ingestion.indexing.chunking import unbold_labels
from ingestion.indexing.embedders import get_embedder
from ingestion.models import Chunk

logger = logging.getLogger(__name__)

RESORT = 5
# Fitted by bench/fit_sentences.py: the re-ranker's logit, and the cosine gap of the passage's best unit to the best
# unit of the five (``scoring.cosine_gap``).
WEIGHTS = (0.7096, 5.6089)
BIAS = 0.3309
WRITE_BATCH = 200


@lru_cache(maxsize=4096)
def unit_texts(text: str) -> tuple[str, ...]:
    """The texts of a passage's answer units (code blocks aside), in the passage's order."""
    return tuple(u.text for u in answer_units(blocks_of(text, 1)))


def sentence_key(embedder_name: str, units: tuple[str, ...]) -> str:
    return hashlib.sha256("\x1f".join((embedder_name, *units)).encode()).hexdigest()[:40]


def enabled() -> bool:
    return setting("SENTENCE_VECTORS") == "on"


def fill_book(book, *, embedder=None) -> dict:
    """Embed the units of every passage of ``book`` whose stored vectors are missing or stale (whatever
    ``SENTENCE_VECTORS`` says: the caller checks ``enabled()``). Returns ``{"passages", "reused",
    "units_embedded", "seconds"}`` (all 0 when there was nothing to do)."""
    started = time.monotonic()
    report = {"passages": 0, "reused": 0, "units_embedded": 0, "seconds": 0.0}
    embedder = embedder or get_embedder()
    if book.embedder_name != embedder.name:
        return report  # indexed with another embedder: its passages can't be compared with this one's vectors
    stored = dict(SentenceVectors.objects.filter(chunk__book=book).values_list("chunk_id", "key"))
    todo: dict[str, tuple[str, tuple[str, ...]]] = {}
    for chunk_id, text in Chunk.objects.filter(book=book).values_list("id", "text").iterator(chunk_size=500):
        units = unit_texts(text)
        key = sentence_key(embedder.name, units)
        if stored.get(chunk_id) != key:
            todo[chunk_id] = (key, units)
    ids = list(todo)
    if ids:
        logger.info("embedding the sentences of %d passages of book %s", len(ids), book.slug)
    try:
        for start in range(0, len(ids), WRITE_BATCH):
            batch = {cid: todo[cid] for cid in ids[start:start + WRITE_BATCH]}
            reuse = {}
            for key, count, vectors in (SentenceVectors.objects.filter(key__in={k for k, _ in batch.values()})
                                        .values_list("key", "count", "vectors")):
                reuse.setdefault(key, (count, bytes(vectors)))
            texts = sorted({u for key, units in batch.values() if key not in reuse for u in units})
            made = (dict(zip(texts, embedder.embed_documents([unbold_labels(t) for t in texts]), strict=True))
                    if texts else {})
            rows = []
            for cid, (key, units) in batch.items():
                if key in reuse:
                    count, vectors = reuse[key]
                    report["reused"] += 1
                else:
                    count = len(units)
                    vectors = (np.stack([made[u] for u in units]).astype(np.float16).tobytes() if units else b"")
                    reuse[key] = (count, vectors)
                rows.append(SentenceVectors(chunk_id=cid, key=key, count=count, vectors=vectors))
            with transaction.atomic():
                SentenceVectors.objects.filter(chunk_id__in=list(batch)).delete()
                SentenceVectors.objects.bulk_create(rows)
            report["passages"] += len(rows)
            report["units_embedded"] += len(texts)
    except BookchatError as exc:  # the embeddings server went away: the book answers without them meanwhile
        logger.warning("sentence vectors of book %s stopped after %d passages: %s", book.slug, report["passages"],
                       exc.message)
    report["seconds"] = round(time.monotonic() - started, 3)
    if report["passages"]:
        logger.info("sentence vectors of book %s: %d passages (%d reused), %d units embedded in %.1f s", book.slug,
                    report["passages"], report["reused"], report["units_embedded"], report["seconds"])
    return report


def attach(chunks: list, query_vector, *, embedder_name: str) -> None:
    """Set ``sentence_similarities`` (the question's cosine with each unit, in ``unit_texts`` order) on each of
    ``chunks`` whose stored vectors match its current units; the others keep ``None``."""
    if not chunks or not enabled():
        return
    query = np.asarray(query_vector, dtype=np.float32)
    stored = {cid: (key, count, bytes(vectors)) for cid, key, count, vectors in SentenceVectors.objects.filter(
        chunk_id__in=[c.id for c in chunks]).values_list("chunk_id", "key", "count", "vectors")}
    for chunk in chunks:
        found = stored.get(chunk.id)
        units = unit_texts(chunk.text)
        if found is None or found[0] != sentence_key(embedder_name, units) or found[1] != len(units):
            continue
        if not units:
            chunk.sentence_similarities = []
            continue
        matrix = np.frombuffer(found[2], dtype=np.float16).reshape(len(units), -1).astype(np.float32)
        chunk.sentence_similarities = [float(s) for s in matrix @ query]


def resort_features(head: list) -> list[list[float]]:
    """Per passage of ``head`` (all with similarities): the re-ranker's logit and its best unit's cosine gap
    (``scoring.cosine_gap``) to the best of them. A passage of code alone has no unit: its own cosine stands for
    its best one."""
    best = [max(c.sentence_similarities, default=c.dense) for c in head]
    top = max(best)
    return [[logit(c.score), cosine_gap(b, top)] for c, b in zip(head, best, strict=True)]


def resort(candidates: list, query_vector, *, embedder_name: str) -> list:
    """``candidates`` (best first) with the first ``RESORT`` scored and ordered again (see the module
    docstring); the rest stay below them. Unchanged unless every one of the first has current vectors."""
    head, tail = candidates[:RESORT], candidates[RESORT:]
    attach(head, query_vector, embedder_name=embedder_name)
    if not head or any(c.sentence_similarities is None for c in head):
        return candidates
    for candidate, row in zip(head, resort_features(head), strict=True):
        candidate.score = logistic(BIAS + sum(w * x for w, x in zip(WEIGHTS, row, strict=True)))
    return order_head_over_tail(head, tail)
