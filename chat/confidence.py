"""Confidence: how far a reader can rely on an answer, 0–1 and a level (high, medium, low).

Two parts, weighted by ``CONFIDENCE_RETRIEVAL_WEIGHT`` (0.6): the *retrieval strength* (where the
question's scope score sits between the book's calibrated threshold and the typical score of its
in-scope questions) and the *support* (the share of the answer's sentences its sources support,
and the share of the question's words the answer or its cited headings cover). A refusal keeps
half of the retrieval strength; a withheld answer has no support.
"""

from __future__ import annotations

from bookchat.conf import setting
from chat.grounding import GroundingReport
from chat.terms import content_terms, strip_citations


def confidence_level(confidence: float) -> str:
    if confidence >= setting("CONFIDENCE_HIGH"):
        return "high"
    return "medium" if confidence >= setting("CONFIDENCE_MEDIUM") else "low"


def retrieval_strength(*, scope_score: float, threshold: float, calibration: dict, selected_overlap: float) -> float:
    """0.5 at the book's threshold, 1.0 at the typical score of its in-scope questions (from calibration)."""
    typical = calibration.get("in_scope_median") or threshold + 0.05
    span = max(typical - threshold, 0.02)
    strength = 0.5 + 0.5 * (scope_score - threshold) / span
    if selected_overlap >= 0.5:
        strength = max(strength, 0.5 + 0.5 * selected_overlap)
    return min(1.0, max(0.0, strength))


def question_coverage(question: str, answer: str, cited_headings: list[str]) -> float:
    """Share of the question's content words found in the answer or in the headings of the sources it cites."""
    asked = set(content_terms(question))
    if not asked:
        return 1.0
    seen = set(content_terms(strip_citations(answer)))
    for heading in cited_headings:
        seen |= set(content_terms(heading))
    return len(asked & seen) / len(asked)


def answer_confidence(*, strength: float, refused: bool, flagged: bool, grounding: GroundingReport,
                      coverage: float) -> float:
    if refused:
        return round(0.5 * strength, 3)
    support = 0.0 if flagged else 0.5 * grounding.supported_share + 0.5 * coverage
    weight = setting("CONFIDENCE_RETRIEVAL_WEIGHT")
    return round(weight * strength + (1 - weight) * support, 3)
