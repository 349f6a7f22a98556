"""Per-book calibration of the "not covered" threshold, run when a book's passages change.

Similarity levels shift from book to book (and embedder to embedder), so one global cut-off
either refuses good questions in one book or answers off-topic ones in another. Each book
is measured against two probe sets through the real retrieval path:

* **out of scope**: the shipped off-topic questions (``chat/data/off_topic_questions.txt``,
  ~75 questions over ~25 everyday domains);
* **in scope**: pseudo-questions made from the book itself — four consecutive content words of
  a sentence from each of up to ``PROBES`` sampled passages (terse, like a reader's query,
  and scored against the whole book).

A question's *scope score* is its best cosine plus ``SCOPE_COVERAGE_WEIGHT`` times the
IDF-weighted share of its words found in the top passages (off-topic questions share few
of a book's rarer words, so this separates the two sets more than cosine alone). The
threshold sits just above the off-topic set's ``OFF_QUANTILE`` quantile, but never above the
in-scope probes' ``IN_QUANTILE`` quantile: false refusals are worse than a missed refusal.

The same probes (their capitals kept) also go through the answerability check
(``chat.pipeline.answerability``): the share it refuses is stored, and decides whether the check runs
for this book.

**Questions in another language than the book's** (``crosslingual``, ``chat.pipeline.language``) share none of
its words but names, numbers and code, and their cosines run lower (multilingual vectors match meaning across
languages, less closely than within one): measured on docusaurus-docs, the best cosine of its answerable questions
asked in Spanish, Urdu, Chinese or French was 0.03–0.04 below the same questions in English at the median, while
off-topic questions scored the same in any language (BENCHMARKS.md, "Questions in other languages"). So their
scope score is the best cosine alone, against a threshold of their own: the ``XL_OFF_QUANTILE`` quantile of the
best cosines of translated off-topic questions (``chat/data/off_topic_questions.i18n.txt``, not tuned on any book;
their vectors moved to the book's language as a question's are, ``chat.pipeline.crosslingual``) + ``MARGIN``, never
above the book's own threshold. It is measured on the first cross-lingual question a book gets (a tenth of a
second: the translated questions' vectors are shipped for the default embedder) and kept with the calibration.

Coverage is measured on the top fused passages, so the threshold belongs to the fusion mode
(and coverage weight) it was measured with: ``manage.py calibrate`` re-measures after a change.
"""

from __future__ import annotations

import logging
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.db import connection, transaction
from django.utils import timezone

from bookchat.base.conf import setting
from chat.models import ScopeCalibration
from chat.pipeline.answerability import MAX_PROBE_REFUSALS, check_retrieved
from chat.pipeline.crosslingual import off_topic_vectors
from chat.pipeline.deadline import Deadline
from chat.pipeline.language import book_language
from chat.pipeline.retrieval import Retrieval, get_dense_search, retrieve
from chat.pipeline.terms import STOP_WORDS, plain_text, split_sentences
from ingestion.indexing.embedders import get_embedder
from ingestion.models import Book, Chunk

_CASED_WORD = re.compile(r"[^\W_]+(?:[-'.][^\W_]+)*")

logger = logging.getLogger(__name__)

METHOD = "off-topic q95 + 0.005, capped at kw4 probes q05; score = cosine + w * coverage; cased probes (v2)"
OFF_TOPIC_FILE = Path(__file__).resolve().parent.parent / "data" / "off_topic_questions.txt"
XL_METHOD = "translated off-topic best cosine (moved vectors) q75 + 0.005, capped at the book's threshold (v2)"
XL_OFF_QUANTILE = 0.75
PROBES = 80
OFF_QUANTILE = 0.95
IN_QUANTILE = 0.05
MARGIN = 0.005
SELECTED_OVERLAP = 0.5  # a question about selected text is in scope when a passage holds this share of it


def off_topic_questions() -> list[str]:
    lines = OFF_TOPIC_FILE.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


_vectors: dict[str, list] = {}


def _off_topic_vectors() -> list:
    """The off-topic questions' query vectors, embedded once per process and embedder."""
    embedder = get_embedder()
    if embedder.name not in _vectors:
        _vectors[embedder.name] = list(embedder.embed_queries(off_topic_questions()))
    return _vectors[embedder.name]


def scope_score(retrieval: Retrieval) -> float:
    """What the scope decision compares with the threshold: best cosine plus a little lexical coverage."""
    return retrieval.best_cosine + setting("SCOPE_COVERAGE_WEIGHT") * retrieval.lexical_coverage


@dataclass
class Scope:
    covered: bool
    score: float
    threshold: float
    calibration: dict


def check_scope(book: Book, retrieval: Retrieval, *, crosslingual: bool = False) -> Scope:
    """The scope decision, for answers and searches alike: does the book cover the question? The scope score of
    what was retrieved against the book's threshold (for a question in another language than the book's, the best
    cosine against the cross-lingual threshold); a question about text selected from the book is covered
    when a retrieved passage holds it."""
    calibration = book_calibration(book)
    if crosslingual:
        threshold, score = crosslingual_threshold(book, calibration), retrieval.best_cosine
    else:
        threshold, score = scope_threshold(book, calibration), scope_score(retrieval)
    covered = bool(retrieval.chunks) and (score >= threshold or retrieval.best_selected_overlap >= SELECTED_OVERLAP)
    return Scope(covered, score, threshold, calibration)


def book_calibration(book: Book) -> dict:
    calibration = (ScopeCalibration.objects.filter(book=book).first()
                   or (ScopeCalibration.objects.filter(book_id=book.edition_of_id).first()
                       if book.edition_of_id else None))
    return {"threshold": calibration.threshold, **calibration.details} if calibration else {}


def scope_threshold(book: Book, calibration: dict | None = None) -> float:
    """The scope score below which a question is not covered: the setting when set, else the book's own
    calibrated threshold (0, so nothing is refused, for a book that was never calibrated)."""
    calibration = book_calibration(book) if calibration is None else calibration
    return setting("SCOPE_THRESHOLD") or calibration.get("threshold") or 0.0


def crosslingual_threshold(book: Book, calibration: dict | None = None) -> float:
    """The best cosine below which a question in another language than the book's is not covered: the
    ``SCOPE_THRESHOLD`` setting when set, else measured once for the book (``measure_crosslingual``) and kept with
    its calibration; 0 for a book never calibrated."""
    calibration = book_calibration(book) if calibration is None else calibration
    if setting("SCOPE_THRESHOLD") or not calibration.get("threshold"):
        return scope_threshold(book, calibration)
    measured = calibration.get("crosslingual") or {}
    if measured.get("method") != XL_METHOD:
        measured = measure_crosslingual(book, calibration)
        calibration["crosslingual"] = measured
    return measured["threshold"]


def measure_crosslingual(book: Book, calibration: dict) -> dict:
    """Measure the cross-lingual threshold on the translated off-topic questions and keep it in the book's stored
    calibration details (under ``crosslingual``)."""
    started = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:  # the best cosine alone: the dense side, nearest one
        search = get_dense_search()
        cosines = np.asarray([max(search.candidates(cursor, book=book, vector=v, limit=1, document_ids=None,
                                                    seconds=60.0).values(), default=0.0)
                              for v in off_topic_vectors(book_language(book))])
    level = float(np.quantile(cosines, XL_OFF_QUANTILE)) + MARGIN
    measured = {"method": XL_METHOD, "threshold": round(min(level, calibration["threshold"]), 4),
                "off_topic": _summary(cosines), "seconds": round(time.monotonic() - started, 2)}
    stored = ScopeCalibration.objects.filter(book=book).first() or (
        ScopeCalibration.objects.filter(book_id=book.edition_of_id).first() if book.edition_of_id else None)
    if stored is not None:
        stored.details = {**stored.details, "crosslingual": measured}
        stored.save(update_fields=["details"])
    logger.info("cross-lingual threshold of book %s: %.4f", book.slug, measured["threshold"])
    return measured


def in_scope_probes(book, count: int = PROBES) -> list[str]:
    """Terse pseudo-questions drawn from the book's own sentences (deterministic for a given book text)."""
    rows = list(Chunk.objects.filter(book=book).order_by("id").values_list("id", "text", "heading_path"))
    rng = random.Random(f"{book.slug}:{len(rows)}")
    rng.shuffle(rows)
    probes = []
    for _, text, heading_path in rows:
        sentences = [s for s in split_sentences(plain_text(text)) if 8 <= len(s.split()) <= 60]
        keywords = []
        if sentences:
            sentence = rng.choice(sentences)
            # Capitals kept: the answerability check reads names from them (the scope score ignores case).
            keywords = [w for w in _CASED_WORD.findall(sentence) if w.casefold() not in STOP_WORDS and len(w) > 2]
        if len(keywords) >= 4:
            start = rng.randrange(0, len(keywords) - 3)
            probes.append(" ".join(keywords[start:start + 4]))
        elif heading_path:
            probes.append(heading_path.rsplit(" > ", 1)[-1])
        if len(probes) >= count:
            break
    return probes


def is_current(details: dict) -> bool:
    """Whether a stored calibration was measured the way the current settings would measure it."""
    return (details.get("method") == METHOD and details.get("fusion") == setting("FUSION")
            and details.get("coverage_weight") == setting("SCOPE_COVERAGE_WEIGHT"))


def calibrate_book(book) -> dict:
    """Measure the book, store its threshold on its ``ScopeCalibration`` and return the details."""
    started = time.monotonic()

    unanswerable: list[bool] = []

    def scores(questions: list[str], vectors=None, *, check: bool = False) -> np.ndarray:
        vectors = vectors if vectors is not None else [None] * len(questions)
        out = []
        for q, v in zip(questions, vectors, strict=True):
            retrieval = retrieve(book=book, question=q, deadline=Deadline(60.0), query_vector=v, stage_seconds=60.0)
            out.append(scope_score(retrieval))
            if check:
                unanswerable.append(not check_retrieved(q, retrieval.chunks).answerable)
        return np.asarray(out, dtype=np.float64)

    off = scores(off_topic_questions(), _off_topic_vectors())
    probes = in_scope_probes(book)
    inside = scores(probes, check=True) if probes else np.asarray([], dtype=np.float64)
    probe_refusals = sum(unanswerable) / len(unanswerable) if unanswerable else 0.0
    off_level = float(np.quantile(off, OFF_QUANTILE)) + MARGIN
    threshold = off_level
    if len(inside):
        threshold = min(off_level, float(np.quantile(inside, IN_QUANTILE)))
    details = {
        "method": METHOD,
        "fusion": setting("FUSION"),
        "coverage_weight": setting("SCOPE_COVERAGE_WEIGHT"),
        "threshold": round(threshold, 4),
        "off_topic": _summary(off),
        "in_scope_probes": _summary(inside),
        "in_scope_median": round(float(np.median(inside)), 4) if len(inside) else None,
        "off_topic_refused": round(float((off < threshold).mean()), 3),
        "probes_refused": round(float((inside < threshold).mean()), 3) if len(inside) else None,
        # The answerability check, measured on the same probes: off for a book where it refuses too many.
        "answerability_probes_refused": round(probe_refusals, 3),
        "answerability": probe_refusals <= MAX_PROBE_REFUSALS,
        "seconds": round(time.monotonic() - started, 2),
        "computed_at": timezone.now().isoformat(),
    }
    ScopeCalibration.objects.update_or_create(book=book, defaults={"threshold": threshold, "details": details})
    logger.info("calibrated book %s: threshold %.4f", book.slug, threshold)
    return details


def _summary(values: np.ndarray) -> dict:
    if not len(values):
        return {"n": 0}
    q = np.quantile(values, [0.05, 0.5, 0.95])
    return {"n": int(len(values)), "p5": round(float(q[0]), 4), "p50": round(float(q[1]), 4),
            "p95": round(float(q[2]), 4), "max": round(float(values.max()), 4)}
