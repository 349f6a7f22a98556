"""Answering a question: book → conversation → retrieve → in scope? → generate → check grounding → respond.

``answer_events`` is the one pipeline: it yields ``("token", {"text": …})`` events while the
answer is written and one ``("final", response)`` event, whose ``answer`` is authoritative
(a streamed LLM answer that fails the grounding check, or that falls back to the extractive
generator, is replaced there). ``answer_question`` runs the same pipeline and returns only
the response. Every failure that stops an answer is a ``RequestError`` the edges render
(400 bad input, 404 unknown book, 504 out of time); nothing else escapes half-done.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from bookchat.conf import setting
from chat.pipeline import conversations
from chat.pipeline.announcements import audit_failures, audited_source, send_audit
from chat.pipeline.answerability import Answerability, asked, check_retrieved
from chat.pipeline.calibration import check_scope
from chat.pipeline.confidence import LEVEL_NOTES, ConfidenceInput, assess
from chat.pipeline.deadline import Deadline
from chat.pipeline.editions import resolve_book
from chat.pipeline.generation import (
    NOT_IN_BOOK,
    Excerpt,
    ExtractiveGenerator,
    GenerationFailed,
    GenerationInput,
    Usage,
    get_generator,
)
from chat.pipeline.grounding import GroundingReport, check_grounding
from chat.pipeline.questions import AskRequest
from chat.pipeline.rendering import render_answer
from chat.pipeline.retrieval import Retrieval, nearest_sections, retrieve
from chat.pipeline.source_cards import source_card
from ingestion.models import Book

logger = logging.getLogger(__name__)

WITHHELD_MESSAGE = ("I couldn't answer this reliably from the book: the answer I found was not supported by the "
                    "passages it cited. The sources below are the closest passages; please check them.")
LOW_CONFIDENCE_DISCLAIMER = ("Low confidence: this passage is probably not what you asked. Check the cited "
                             "sections before relying on it.")
UNSURE_PREFIX = "I'm not sure the book answers this directly. The closest passage I found says:"
ASKED_WORDS = 16  # a refusal quotes at most this many words of the question
_GREETING = re.compile(r"^(?:(?:(?:hi|hello|hey)(?:\s+there)?|thanks|thank you|ok|okay|so|quick question)"
                       r"\b[\s,:!.-]*)+", re.IGNORECASE)
_UNQUOTABLE = re.compile(r"[^\w\s.,?'’:/+-]")
# Why an answer is a refusal: the scope check, the answerability check, or a confidence below medium.
NOT_COVERED, UNANSWERABLE, UNSURE = "not_covered", "unanswerable", "unsure"


@dataclass
class Prepared:
    request: AskRequest
    book: Book
    conversation: conversations.Conversation
    turns: list
    resolved_question: str
    retrieval: Retrieval
    threshold: float
    in_scope: bool
    deadline: Deadline
    scope_score: float = 0.0
    calibration: dict = field(default_factory=dict)
    answerability: Answerability | None = None  # checked for questions in scope
    confidence_features: dict[str, float] = field(default_factory=dict)  # what the confidence model read
    draft_answer: str = ""  # an unsure answer, as written before it was replaced by the refusal
    follows: str = ""  # for a follow-up, the question it follows (``resolved_question`` holds both)
    answer_id: uuid.UUID = field(default_factory=uuid.uuid4)


def prepare(request: AskRequest, *, deadline: Deadline | None = None) -> Prepared:
    """Everything before generation: may raise (and so answer 400/404/504) before any byte is streamed."""
    deadline = deadline or Deadline()
    with audit_failures(request, deadline):
        return _prepare(request, deadline)


def _prepare(request: AskRequest, deadline: Deadline) -> Prepared:
    book = resolve_book(request.book, version=request.version, locale=request.locale)
    conversation = conversations.conversation_for(request.session_id, book)
    turns = conversations.history(conversation)
    follows = conversations.followed_question(request.question, turns)
    resolved = conversations.searched_with(request.question, follows)
    retrieval = retrieve(book=book, question=resolved, selected_text=request.selected_text,
                         chapter=request.chapter, top_k=request.max_results, deadline=deadline)
    scope = check_scope(book, retrieval)
    return Prepared(request, book, conversation, turns, resolved, retrieval, scope.threshold, scope.covered,
                    deadline, scope_score=scope.score, calibration=scope.calibration, follows=follows)


def answerability_on(calibration: dict) -> bool:
    """Whether the answerability check runs: the setting, or with ``auto`` the book's calibration."""
    mode = setting("ANSWERABILITY")
    return mode == "on" or (mode == "auto" and bool(calibration.get("answerability")))


def answer_events(prepared: Prepared) -> Iterator[tuple[str, dict]]:
    """Run generation for a prepared question: token events, then one final event with the response."""
    with audit_failures(prepared.request, prepared.deadline, book=prepared.book, session=prepared.conversation.id):
        yield from _answer_events(prepared)


def _answer_events(p: Prepared) -> Iterator[tuple[str, dict]]:
    generation_started = time.monotonic()
    generator_name, notice, refused, usage = "extractive", None, None, None
    held = True  # LLM text is held back until it cannot be the NOT_IN_BOOK marker
    if p.in_scope and answerability_on(p.calibration):  # on the passages the answer will cite
        p.answerability = check_retrieved(p.request.question, p.retrieval.chunks,  # a follow-up: what it asks
                                          selected_text=p.request.selected_text)
    if not p.in_scope:
        answer, refused = _not_covered_message(p.book, p.request.question), NOT_COVERED
    elif p.answerability is not None and not p.answerability.answerable:
        answer, refused = _unanswerable_message(p.book, p.request.question, p.answerability.missing), UNANSWERABLE
    else:
        generator = get_generator()
        generator_name = generator.name
        data = GenerationInput(
            question=p.request.question, book_title=p.book.title, selected_text=p.request.selected_text,
            excerpts=[Excerpt(n, c.heading_path, c.text, c.score, c.sentence_similarities)
                      for n, c in enumerate(p.retrieval.chunks, 1)],
            history=[(t.question, t.answer) for t in p.turns], follows=p.follows,
        )
        pieces: list[str] = []
        usage = None if isinstance(generator, ExtractiveGenerator) else Usage()
        try:
            budget = p.deadline.stage_budget(setting("GENERATION_SECONDS"))
            for piece in generator.stream(data, budget_seconds=budget, usage=usage):
                pieces.append(piece)
                if isinstance(generator, ExtractiveGenerator):
                    continue
                text = "".join(pieces).lstrip()
                if held and (len(text) > len(NOT_IN_BOOK) or not NOT_IN_BOOK.startswith(text)):
                    held = False
                    yield "token", {"text": text}
                elif not held:
                    yield "token", {"text": piece}
            answer = "".join(pieces).strip()
        except GenerationFailed as exc:
            logger.warning("generator %s failed, answering extractively: %s", generator.name, exc.message)
            notice = (f"The language model could not answer ({exc.message}), so this answer is made of the "
                      "book's own sentences.")
            generator_name = ExtractiveGenerator.name
            answer = "".join(ExtractiveGenerator().stream(data, budget_seconds=0)).strip()
        if answer.startswith(NOT_IN_BOOK) or answer.endswith(NOT_IN_BOOK):
            answer, refused = _not_covered_message(p.book, p.request.question), NOT_COVERED
    p.deadline.check("generation")
    response = _respond(p, answer=answer, refused=refused, generator_name=generator_name, notice=notice,
                        generation_seconds=time.monotonic() - generation_started, usage=usage)
    # An extractive answer or a refusal goes out in one piece, once it is known to be sent (confidence may still
    # turn an answer into a refusal); an LLM's text already streamed is replaced by the final event when it must be.
    if generator_name == ExtractiveGenerator.name or (response["refused"] and held):
        yield "token", {"text": response["answer"]}
    yield "final", response


def answer_question(request: AskRequest, *, deadline: Deadline | None = None) -> dict:
    """Answer one question; the response dict of ARCHITECTURE.md's "Response shape"."""
    final = None
    for kind, payload in answer_events(prepare(request, deadline=deadline)):
        if kind == "final":
            final = payload
    return final


# -- the response -----------------------------------------------------------------------------
def _respond(p: Prepared, *, answer: str, refused: str | None, generator_name: str, notice: str | None,
             generation_seconds: float, usage: Usage | None = None) -> dict:
    chunks = p.retrieval.chunks
    grounding = GroundingReport()
    flagged = False
    grounding_started = time.monotonic()
    if not refused:
        grounding = check_grounding(answer, [c.text for c in chunks])
        if not grounding.passed:
            logger.info("answer withheld (%s): %r", grounding.reason, p.request.question[:200])
            answer, flagged = WITHHELD_MESSAGE, True
    confidence, level, shown_below_floor = 0.0, "low", False
    if not refused and not flagged:
        assessed = assess(ConfidenceInput(
            question=p.request.question, resolved_question=p.resolved_question, answer=answer, chunks=chunks,
            cited=grounding.cited, scope_score=p.scope_score, threshold=p.threshold, calibration=p.calibration,
            selected_overlap=p.retrieval.best_selected_overlap, selected_text=p.request.selected_text,
            previous_answer=p.turns[-1].answer if p.follows else ""))
        p.confidence_features = assessed.features
        confidence, level = assessed.probability, assessed.level
        refuse_unsure = setting("UNSURE_ANSWERS") == "refuse"
        shown_below_floor = assessed.held_back and not refuse_unsure
        if assessed.held_back and refuse_unsure:
            p.draft_answer, answer, refused, level = answer, _unsure_message(p.book, p.request.question), UNSURE, "low"
            logger.info("answer held back as unsure (confidence %.3f%s): %r", confidence,
                        ", navigation links only" if assessed.navigation else "", p.request.question[:200])
        elif level == "unsure":  # shown as what it is: the closest passage, not an answer
            answer = f"{UNSURE_PREFIX}\n\n{answer}"
    suggestions = []
    if refused or flagged:
        suggestions = nearest_sections(p.retrieval, by_rank=refused == UNSURE)
    sources = [] if refused else [source_card(n, c, answer, n in grounding.cited) for n, c in enumerate(chunks, 1)]
    response = {
        "answer": answer,
        "answer_html": render_answer(answer, sources),
        "sources": sources,
        "confidence": confidence,
        "confidence_level": level,
        "confidence_note": None if refused or flagged else LEVEL_NOTES[level],
        "generator": generator_name,
        "session_id": str(p.conversation.id),
        "response_time_ms": p.deadline.elapsed_ms(),
        "answer_id": str(p.answer_id),
        "book": p.book.root.slug,
        "version": p.book.version,
        "locale": p.book.locale,
        "refused": bool(refused),
        "refusal_reason": refused,
        "suggestions": suggestions,
        # The answer itself says an unsure answer is the closest passage; one below the floor, shown under
        # UNSURE_ANSWERS=answer, is said to be shakier still.
        "disclaimer": LOW_CONFIDENCE_DISCLAIMER if shown_below_floor else None,
        "notice": notice,
        "flagged_for_review": flagged,
        "grounding": grounding.as_dict() if not refused else None,
        "resolved_question": p.resolved_question,
        "retrieval": {"best_cosine": round(p.retrieval.best_cosine, 4), "scope_score": round(p.scope_score, 4),
                      "threshold": round(p.threshold, 4), "lexical_coverage": round(p.retrieval.lexical_coverage, 3),
                      "candidates": p.retrieval.candidates,
                      "answerability": p.answerability.as_dict() if p.answerability else None,
                      "confidence_features": {k: round(v, 4) for k, v in p.confidence_features.items()}},
        "timings_ms": {"retrieval": round(p.retrieval.seconds * 1000, 2), **p.retrieval.timings_ms,
                       "generation": round(generation_seconds * 1000, 2),
                       "grounding": round((time.monotonic() - grounding_started) * 1000, 2)},
        # The language model's tokens, also when it failed and the extractive generator answered: they were spent.
        "llm_usage": usage.as_dict() if usage else None,
    }
    conversations.record_turn(p.conversation, question=p.request.question, resolved_question=p.resolved_question,
                              answer=answer, answer_id=p.answer_id, refused=bool(refused), response=response)
    status = (UNSURE if refused == UNSURE or level == "unsure" else "not_covered" if refused
              else "withheld" if flagged else "answered")
    send_audit(p.request, answer_id=p.answer_id, book_slug=p.book.slug, session_id=p.conversation.id,
                resolved_question=p.resolved_question, answer=answer, generator=generator_name,
                sources=[audited_source(s) for s in sources], suggestions=suggestions, confidence=confidence,
                confidence_level=level, status=status, refused=bool(refused), refusal_reason=refused,
                flagged=flagged, draft_answer=p.draft_answer,
                grounding=response["grounding"], retrieval=response["retrieval"],
                latency_ms=response["response_time_ms"], timings_ms=response["timings_ms"],
                llm_usage=response["llm_usage"])
    return response


def _unanswerable_message(book: Book, question: str, missing: list[str]) -> str:
    named = _and([f"“{name}”" for name in named_as_asked(question, missing[:3])])
    return (f"“{book.title}” doesn't mention {named} where it discusses this, so I can't answer "
            f"“{asked_about(question)}” from the book. The sections below came closest.")


def _unsure_message(book: Book, question: str) -> str:
    return (f"“{book.title}” doesn't seem to answer “{asked_about(question)}” directly, and rather than guess, "
            "I'll point you to the sections that came closest:")


def _not_covered_message(book: Book, question: str) -> str:
    return (f"“{asked_about(question)}” isn't covered in “{book.title}”, so I can't answer it from the book. "
            "The sections below came closest.")


def asked_about(question: str, *, words: int = ASKED_WORDS) -> str:
    """What the question asks, in the reader's words, to quote in a refusal: the sentences that ask (not the
    situation before them), without a greeting, at most ``words`` words, and only letters, digits and plain
    punctuation (nothing the answer's Markdown would read as a link, an emphasis or a citation)."""
    text = _GREETING.sub("", asked(question).strip()).strip()
    text = " ".join(_UNQUOTABLE.sub(" ", text).split())
    cut = text.split(" ")
    if len(cut) > words:
        text = " ".join(cut[:words]).rstrip(",;:") + "…"
    return text or "this"


def named_as_asked(question: str, terms: list[str]) -> list[str]:
    """The question's missing names as the reader wrote them: each term in their case, with the capitalised
    words around it that make one name ("vitals" in "Core Web Vitals scores" → "Core Web Vitals")."""
    tokens = re.findall(r"[^\s\"“”(),;:!?]+", question)
    out: list[str] = []
    for term in terms:
        at = next((n for n, t in enumerate(tokens) if t.strip(".'’").casefold() == term), None)
        if at is None:
            name = term
        else:
            start, end = at, at + 1
            while start > 1 and tokens[start - 1][:1].isupper():  # not the sentence's first word
                start -= 1
            while end < len(tokens) and tokens[end][:1].isupper():
                end += 1
            name = " ".join(t.strip(".'’") for t in tokens[start:end])
        name = _UNQUOTABLE.sub("", name)
        if name and name not in out:
            out.append(name)
    return out or ["what it asks about"]


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]
