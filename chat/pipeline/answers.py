"""What an answer is, as the pipeline hands it to the channels: an ``Answer`` and the typed values inside it.

``Answer`` is the one list of a response's fields, each named as the API sends it and in the order it sends them;
its parts are the values of the steps that make them (``source_cards.Source``, ``retrieval.Suggestion``,
``grounding.GroundingReport``, ``RetrievalFigures`` with ``answerability.Answerability``,
``generation.TokenUsage``), named the same way. So nothing reads a response by key: the pipeline, ``evaluate`` and
``ask`` read attributes, and a channel that sends JSON makes it once, at its edge
(``chat.channels.responses.answer_data``). Its fields carrying the JSON's names, ``dataclasses.asdict(answer)``
holds the same content: what a turn keeps, for the chat page to show again (``answering.remember``).

The API's schema says what each field means in ``chat.channels.responses``: its serializers restate these fields
with the schema's words (help texts, enums, blank strings) and are checked against these classes when they are
defined (the same names in the same order, nullable exactly where the type admits None), so a field added here
and not there, or the other way round, stops the server from starting and every test from running. Deriving the
serializers from these classes would have moved the API's documentation, and a translation of Python types into
DRF fields, into a pipeline that knows nothing of DRF; the check keeps the schema's words where the schema is
made and the list of fields here.
"""

from __future__ import annotations

from dataclasses import dataclass

from chat.pipeline.answerability import Answerability
from chat.pipeline.generation import TokenUsage
from chat.pipeline.grounding import GroundingReport
from chat.pipeline.retrieval import Suggestion
from chat.pipeline.source_cards import Source


@dataclass(frozen=True)
class RetrievalFigures:
    """What retrieval and the checks measured of a question: for reviewers (the audit row keeps them) and for
    fitting confidence (``evaluate``)."""

    best_cosine: float
    scope_score: float
    threshold: float
    lexical_coverage: float
    candidates: int
    answerability: Answerability | None  # None where the check didn't run
    confidence_features: dict[str, float]  # what the confidence model read; empty for a refusal that drafted none


@dataclass(frozen=True)
class StaffAnswerRef:
    """The course staff's answer an answer is (``chat.pipeline.staff_answers``): which one, and when it was written."""

    id: int
    answered_at: str  # ISO 8601


@dataclass(frozen=True)
class Answer:
    """The response to a question: what ``answering.answer_question`` returns and the stream's ``final`` event
    carries."""

    answer: str  # Markdown with [n] citation markers
    answer_html: str
    sources: list[Source]  # none for a refusal
    confidence: float
    confidence_level: str  # high, medium, unsure or low (``confidence.LEVEL_NOTES``), or staff (``staff_matching``)
    confidence_note: str | None  # None for a refusal or a withheld answer
    generator: str
    session_id: str  # the conversation's UUID, as text
    response_time_ms: int
    answer_id: str  # a UUID, as text
    book: str  # the root book's slug, as clients name it
    version: str
    locale: str
    refused: bool
    refusal_reason: str | None  # ``answering.NOT_COVERED``, ``UNANSWERABLE`` or ``UNSURE``
    suggestions: list[Suggestion]  # the closest sections, for a refusal or a withheld answer
    disclaimer: str | None
    notice: str | None  # why a language model's answer was replaced by the book's own sentences
    flagged_for_review: bool  # withheld by the grounding check
    grounding: GroundingReport | None  # None for a refusal
    resolved_question: str
    retrieval: RetrievalFigures
    timings_ms: dict[str, float]
    llm_usage: TokenUsage | None  # None when no language model was asked
    staff_answer: StaffAnswerRef | None = None  # the course staff's answer this is (level ``staff``), if it is one
    language: str = "en"  # the question's language (``chat.pipeline.language``), the one refusals and labels are in
    book_language: str = "en"  # the book's language
