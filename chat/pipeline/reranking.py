"""The second ranking stage: the fused pool's best ``POOL`` candidates re-ordered by a small logistic model
over cheap features of each candidate against the question.

Fusion blends two scores that each miss something: the dense cosine sits in a narrow band
and barely separates the passage that answers from its neighbours, and BM25 rewards a
passage that repeats one rare word. The re-ranker reads what both leave out, all of it
from data retrieval already has (no second embedding, no extra query):

==================  ================================================================================
``dense``           cosine, min-max normalised over the re-ranked candidates
``dense_gap``       how far the cosine falls below the best one (``scoring.cosine_gap``: × 10)
``bm25``            BM25 over the pool's best
``coverage``        IDF-weighted share of the question's words (those the book has) in the passage
``heading``         the same share, in the passage's heading path alone
``phrase``          share of the question's adjacent word pairs that stand together in the passage
``proximity``       IDF-weighted share of the question's words inside the passage's densest 12-word window
``dense_rank``      1 / rank in dense order; ``lexical_rank`` the same in BM25 order
``sentence``        the best single sentence's share of the question's words (rarity among the candidates)
==================  ================================================================================

Word positions come from the passages' ``tsvector`` s (heading first, then text; Postgres keeps
stop words' positions, so "swizzle a component" is still a pair). The weights are fitted by
``bench/fit_reranker.py`` on the five development sets (squad2-dev, both docusaurus-docs files and
the mdBook and Material sets in ``bench/questions/``, each set weighing the same, L2 3), each book
also left out in turn; they ship here as constants (BENCHMARKS.md has the figures). Every candidate
past the first ``POOL`` stays below them, in fused order.

Decisions: a logistic model whose output is a probability that answer composition and confidence
can read, and 10 weights fit in a file. Its weights are fitted listwise (each question's candidates
compete for the evidence in a softmax) and then scaled to a probability, because the answer needs
the right passage first: held out, that gained hit@1 on every book over a pointwise fit. ``POOL`` = 30, because the
fused top 30 holds the evidence for 99.9 % of squad2-dev's answerable questions and 97–100 % of
docusaurus-docs' (the rest are past the pool altogether).
"""

from __future__ import annotations

import math
from functools import lru_cache

from chat.pipeline.lexical import LexicalResult
from chat.pipeline.scoring import cosine_gap, logistic, order_head_over_tail
from chat.pipeline.terms import content_terms, split_sentences

POOL = 30
WINDOW = 12
SENTENCE_CACHE = 4096  # passages whose sentences' terms are kept (a few MB)
FEATURES = ("dense", "dense_gap", "bm25", "coverage", "heading", "phrase", "proximity", "dense_rank", "lexical_rank",
            "sentence")
# Fitted by bench/fit_reranker.py (see its output in BENCHMARKS.md); the order of FEATURES.
WEIGHTS = (2.0171, -2.3075, 2.8251, 2.2996, 1.0235, 1.7984, 0.6472, 0.9842, 0.5300, 0.9174)
BIAS = -8.0720


def _pairs(query_positions: dict[str, tuple[int, ...]], known: set[str]) -> list[tuple[str, str, int]]:
    """The question's adjacent content-word pairs: (first, second, gap in word positions), gap ≤ 3."""
    seq = sorted((p, t) for t, ps in query_positions.items() if t in known for p in ps)
    out = []
    for (p1, t1), (p2, t2) in zip(seq, seq[1:], strict=False):
        if t1 != t2 and 0 < p2 - p1 <= 3:
            out.append((t1, t2, p2 - p1))
    return out


def _phrase_share(pairs, positions: dict[str, tuple[int, ...]]) -> float:
    if not pairs:
        return 0.0
    found = 0
    for first, second, gap in pairs:
        a, b = positions.get(first), positions.get(second)
        if a and b:
            later = set(b)
            if any(p + d in later for p in a for d in range(1, gap + 2)):
                found += 1
    return found / len(pairs)


def _proximity(positions: dict[str, tuple[int, ...]], idf: dict[str, float], total: float) -> float:
    """IDF-weighted share of the question's words within the densest ``WINDOW`` positions of the passage."""
    if not total or not positions:
        return 0.0
    seq = sorted((p, t) for t, ps in positions.items() for p in ps)
    best, start, counts, weight = 0.0, 0, {}, 0.0
    for p, t in seq:
        counts[t] = counts.get(t, 0) + 1
        if counts[t] == 1:
            weight += idf.get(t, 0.0)
        while seq[start][0] <= p - WINDOW:
            old = seq[start][1]
            counts[old] -= 1
            if not counts[old]:
                weight -= idf.get(old, 0.0)
            start += 1
        best = max(best, weight)
    return best / total


@lru_cache(maxsize=SENTENCE_CACHE)
def _sentence_terms(text: str) -> tuple[frozenset[str], ...]:
    """The content terms of each sentence of a passage's ``text`` (kept for the passages read most: the same ones
    come back question after question, and keystroke after keystroke in a search)."""
    return tuple(frozenset(content_terms(s)) for line in text.splitlines() for s in split_sentences(line))


def _sentence_coverage(question: str, candidates: list) -> list[float]:
    """Per candidate: the best single sentence's share of the question's words, weighted by their rarity in
    the candidates (our own light stemming; an answer usually stands in one sentence)."""
    asked = set(content_terms(question))
    if not asked:
        return [0.0] * len(candidates)
    sentence_terms = []
    for c in candidates:
        sentence_terms.append([s & asked for s in _sentence_terms(c.text) if s & asked])
    df = {t: sum(any(t in s for s in sentences) for sentences in sentence_terms) for t in asked}
    idf = {t: math.log(1 + len(candidates) / (1 + df[t])) for t in asked}
    total = sum(idf.values()) or 1.0
    return [max((sum(idf[t] for t in s) / total for s in sentences), default=0.0) for sentences in sentence_terms]


def candidate_features(candidates: list, lexical: LexicalResult, *, question: str = "") -> list[list[float]]:
    """One feature row (in ``FEATURES`` order) per candidate (``RetrievedChunk`` s, best fused first)."""
    if not candidates:
        return []
    sentence = _sentence_coverage(question, candidates)
    known = {t for t, v in lexical.idf.items() if t in lexical.query_positions} or set(lexical.idf)
    # Words the book has at all: the others can't tell its passages apart.
    idf = {t: lexical.idf[t] for t in known & lexical.present}
    total = sum(idf.values())
    pairs = _pairs(lexical.query_positions, set(idf))
    cosines = [c.dense for c in candidates]
    low, high = min(cosines), max(cosines)
    spread = (high - low) or 1.0
    lex_high = max((c.lexical for c in candidates), default=0.0) or 1.0
    dense_rank = {c.id: r for r, c in enumerate(sorted(candidates, key=lambda c: -c.dense), 1)}
    lex_rank = {c.id: r for r, c in enumerate(sorted(candidates, key=lambda c: -c.lexical), 1)}
    rows = []
    for n, c in enumerate(candidates):
        matched = lexical.matched.get(c.id, set())
        heading = lexical.in_heading.get(c.id, set())
        positions = {t: ps for t, ps in lexical.positions.get(c.id, {}).items() if t in idf}
        rows.append([
            (c.dense - low) / spread,
            cosine_gap(high, c.dense),
            c.lexical / lex_high,
            sum(idf[t] for t in matched if t in idf) / total if total else 0.0,
            sum(idf[t] for t in heading if t in idf) / total if total else 0.0,
            _phrase_share(pairs, positions),
            _proximity(positions, idf, total),
            1 / dense_rank[c.id],
            1 / lex_rank[c.id] if c.lexical > 0 else 0.0,
            sentence[n],
        ])
    return rows


def probability(row: list[float], weights=WEIGHTS, bias: float = BIAS) -> float:
    return logistic(bias + sum(w * x for w, x in zip(weights, row, strict=True)))


def rerank(candidates: list, lexical: LexicalResult, *, question: str) -> list:
    """``candidates`` (best fused first) with the first ``POOL`` re-ordered by the model; each re-ranked
    candidate's ``score`` becomes the model's probability that it holds the answer (the fused score stays
    in ``fused``)."""
    head, tail = candidates[:POOL], candidates[POOL:]
    for candidate, row in zip(head, candidate_features(head, lexical, question=question), strict=True):
        candidate.fused = candidate.score
        candidate.score = probability(row)
    for candidate in tail:
        candidate.fused = candidate.score
    return order_head_over_tail(head, tail)  # the tail below every re-ranked candidate, in fused order
