"""Answering a question, in two calls a channel makes one after the other:

- ``prepare``: book → conversation → retrieve → check scope. It may refuse the request (unknown book or
  chapter, out of time) before any byte of the answer is sent.
- ``answer_steps``: compose → ground → assess confidence → respond → remember, each a function below with a typed
  input and output (``Prepared`` → ``Draft`` → ``GroundingReport`` → ``Verdict`` → ``answers.Answer``).

A question that asks what a course staff's answer of the book answers (``staff_matching``, matched in ``prepare``
from the question's vector and words) gets that answer instead of the book's (``take_over``, level ``staff``),
unless the book's own answer is ``high``; a language model's text is then not streamed, since it is likely replaced.

``answer_events`` yields ``("token", {"text": …})`` events while the answer is written and one
``("final", answer)`` event, whose ``answer`` is authoritative (a streamed LLM answer that fails the grounding
check, or that falls back to the extractive generator, is replaced there); ``answer_question`` returns only the
``Answer``. ``remember`` keeps it on the conversation's turn and tells the audit trail an
``announcements.AuditRecord``. A failure that stops an answer is a ``bookchat.base.errors.BookchatError`` the
channels render; how each question ended is an ``Outcome``, in the pipeline's words, which the audit trail maps to
its own statuses.

The question's language is told in ``prepare`` (``chat.pipeline.language``); one asked in another language than
the book's is *cross-lingual* (``Prepared.crosslingual``): retrieval moves its vector to the book's language, the
scope check reads the best cosine against the book's cross-lingual threshold (``chat.pipeline.calibration``), the
answerability check counts only the terms written as the book writes them, an extractive answer quotes the book
under a label in the reader's language, and every refusal, note and disclaimer is worded in the reader's language
(``chat.pipeline.wording``).
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Generator, Iterator
from dataclasses import asdict, dataclass, field, replace

from bookchat.base.conf import setting
from chat.pipeline import conversations, staff_matching, wording
from chat.pipeline.announcements import AuditRecord, Outcome, audit_failures, audited_source, send_audit
from chat.pipeline.answerability import Answerability, asked, check_retrieved
from chat.pipeline.answers import Answer, RetrievalFigures, StaffAnswerRef
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
from chat.pipeline.language import book_language, detect
from chat.pipeline.questions import AskRequest
from chat.pipeline.rendering import render_answer
from chat.pipeline.retrieval import Retrieval, nearest_sections, retrieve
from chat.pipeline.source_cards import source_card
from ingestion.models import Book

logger = logging.getLogger(__name__)

# In English (each is a msgid of ``chat.pipeline.wording``, said in the question's language).
WITHHELD_MESSAGE = wording.WITHHELD
LOW_CONFIDENCE_DISCLAIMER = wording.LOW_CONFIDENCE
UNSURE_PREFIX = wording.UNSURE_PREFIX
ASKED_WORDS = 16  # a refusal quotes at most this many words of the question
_GREETING = re.compile(r"^(?:(?:(?:hi|hello|hey)(?:\s+there)?|thanks|thank you|ok|okay|so|quick question)"
                       r"\b[\s,:!.-]*)+", re.IGNORECASE)
_UNQUOTABLE = re.compile(r"[^\w\s.,?¿¡'’:/+\-\u0300-\u036f\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed"
                         r"\u0900-\u0903\u093a-\u094f\u0951-\u0957\u0962\u0963]")  # combining marks kept
ASKED_CHARS = 120  # … and this many characters (a Chinese question has no spaces between its words)
# Why an answer is a refusal (``refusal_reason``): the scope check, the answerability check, or a confidence below
# medium.
NOT_COVERED, UNANSWERABLE, UNSURE = "not_covered", "unanswerable", "unsure"
REFUSED_AS = {NOT_COVERED: Outcome.NOT_COVERED, UNANSWERABLE: Outcome.UNANSWERABLE}


@dataclass
class Prepared:
    """A question ready to be answered: its book and conversation, what retrieval found, the scope decision."""

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
    follows: str = ""  # for a follow-up, the question it follows (``resolved_question`` holds both)
    answer_id: uuid.UUID = field(default_factory=uuid.uuid4)
    staff: staff_matching.StaffMatch | None = None  # the course staff's answer that asks the same thing, if any
    language: str = "en"  # the question's language (``chat.pipeline.language``): what the reader is told in
    book_language: str = "en"

    @property
    def crosslingual(self) -> bool:
        """Asked in another language than the book's."""
        return self.language != self.book_language


@dataclass
class Draft:
    """What composing wrote: the answer (or a refusal's message and ``refused``, its reason), by which generator."""

    answer: str
    generator: str
    refused: str | None = None
    answerability: Answerability | None = None  # checked for questions in scope, where it is on
    notice: str | None = None  # why a language model's answer was replaced by the book's own sentences
    failure: GenerationFailed | None = None  # the language model's failure that the notice tells of
    usage: Usage | None = None
    seconds: float = 0.0
    streamed: bool = False  # some of a language model's text went out as tokens already


@dataclass
class Verdict:
    """What the checks made of a draft: the answer the reader gets, its outcome and confidence."""

    answer: str
    outcome: Outcome
    grounding: GroundingReport
    refused: str | None = None
    confidence: float = 0.0
    level: str = "low"
    below_floor: bool = False  # an unsure answer shown although the model put it below the floor
    features: dict[str, float] = field(default_factory=dict)  # what the confidence model read
    draft_answer: str = ""  # an unsure answer as written, before the refusal replaced it

    @property
    def flagged(self) -> bool:
        return self.outcome == Outcome.WITHHELD


@dataclass
class Answered:
    """A question's answer: the response the reader gets, and the verdict it came from."""

    response: Answer
    verdict: Verdict


# -- the pipeline ------------------------------------------------------------------------------
def prepare(request: AskRequest, *, deadline: Deadline | None = None) -> Prepared:
    """Everything before composing (book → conversation → retrieve → check scope): it may raise, and so answer
    400/404/504, before any byte is streamed."""
    deadline = deadline or Deadline()
    with audit_failures(request, deadline):
        book = resolve_book(request.book, version=request.version, locale=request.locale)
        conversation = conversations.conversation_for(request.session_id, book, request.learner)
        turns = conversations.history(conversation)
        follows = conversations.followed_question(request.question, turns)
        resolved = conversations.searched_with(request.question, follows)
        written_in = book_language(book)
        language = detect(request.question, hint=written_in)
        crosslingual = language != written_in
        retrieval = retrieve(book=book, question=resolved, selected_text=request.selected_text,
                             chapter=request.chapter, top_k=request.max_results, deadline=deadline,
                             language=language)
        scope = check_scope(book, retrieval, crosslingual=crosslingual)
        # A staff answer answers a question on its own: not a follow-up, nor a question about a selected passage.
        staff = None if follows or request.selected_text else staff_matching.match(
            book=book, question=request.question, vector=retrieval.vector)
        return Prepared(request, book, conversation, turns, resolved, retrieval, scope.threshold, scope.covered,
                        deadline, scope_score=scope.score, calibration=scope.calibration, follows=follows,
                        staff=staff, language=language, book_language=written_in)


def answer_steps(p: Prepared) -> Generator[tuple[str, dict], None, Answered]:
    """The pipeline after ``prepare``: compose → ground → assess confidence → respond (or a matched staff answer
    takes over: ``take_over``) → remember. Yields the answer's token events as it is written; returns the
    answer."""
    with audit_failures(p.request, p.deadline, book=p.book, session=p.conversation.id):
        draft = yield from compose(p)
        p.deadline.check("generation")
        checks_started = time.monotonic()
        grounding = ground(draft, p.retrieval.chunks, crosslingual=p.crosslingual)
        verdict = assess_confidence(p, draft, grounding)
        answer = respond(p, draft, verdict, checks_seconds=time.monotonic() - checks_started)
        verdict, answer = take_over(p, verdict, answer)
        remember(p, draft, verdict, answer)
        # An extractive answer or a refusal goes out in one piece, once it is known to be sent (confidence may
        # turn an answer into a refusal), and so does any answer to a question a staff answer matched (its
        # language model's text was held back); a language model's text already streamed is replaced by the final
        # event.
        if draft.generator == ExtractiveGenerator.name or (verdict.refused or p.staff) and not draft.streamed:
            yield "token", {"text": answer.answer}
        return Answered(answer, verdict)


def answer_events(prepared: Prepared) -> Iterator[tuple[str, dict | Answer]]:
    """A prepared question's token events, then one ``("final", answer)`` event."""
    answered = yield from answer_steps(prepared)
    yield "final", answered.response


def answer_prepared(prepared: Prepared) -> Answered:
    """A prepared question's answer, its tokens dropped (``evaluate`` reads the verdict too)."""
    steps = answer_steps(prepared)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def answer_question(request: AskRequest, *, deadline: Deadline | None = None) -> Answer:
    """Answer one question (``chat.channels.responses.AnswerSerializer`` documents the response)."""
    return answer_prepared(prepare(request, deadline=deadline)).response


# -- the steps ---------------------------------------------------------------------------------
def answerability_on(calibration: dict) -> bool:
    """Whether the answerability check runs: the setting, or with ``auto`` the book's calibration."""
    mode = setting("ANSWERABILITY")
    return mode == "on" or (mode == "auto" and bool(calibration.get("answerability")))


def compose(p: Prepared) -> Generator[tuple[str, dict], None, Draft]:
    """The draft: a refusal when the book doesn't cover the question or its passages lack what it names, else
    the configured generator's answer, streamed as it is written."""
    started = time.monotonic()
    answerability = None
    if p.in_scope and answerability_on(p.calibration):  # on the passages the answer will cite
        answerability = check_retrieved(p.request.question, p.retrieval.chunks,  # a follow-up: what it asks
                                        selected_text=p.request.selected_text,
                                        book_language=p.book_language if p.crosslingual else None)
    if not p.in_scope:
        draft = Draft(_not_covered_message(p.book, p.request.question, p.language), "extractive", refused=NOT_COVERED)
    elif answerability is not None and not answerability.answerable:
        draft = Draft(_unanswerable_message(p.book, p.request.question, answerability.missing_terms, p.language),
                      "extractive", refused=UNANSWERABLE)
    else:
        draft = yield from _generate(p)
    draft.answerability, draft.seconds = answerability, time.monotonic() - started
    return draft


def _generate(p: Prepared) -> Generator[tuple[str, dict], None, Draft]:
    """The generator's answer. A language model's text is held back until it can't be the ``NOT_IN_BOOK``
    marker, then streamed; when the model fails, the book's own sentences answer, with a notice."""
    generator = get_generator()
    data = GenerationInput(
        question=p.request.question, book_title=p.book.title, selected_text=p.request.selected_text,
        excerpts=[Excerpt(n, c.heading_path, c.text, c.score, c.sentence_similarities)
                  for n, c in enumerate(p.retrieval.chunks, 1)],
        history=[(t.question, t.answer) for t in p.turns], follows=p.follows,
        language=wording.language_name(p.language, "en") if p.crosslingual else "",
    )
    extractive = isinstance(generator, ExtractiveGenerator)
    draft = Draft("", generator.name, usage=None if extractive else Usage())
    pieces: list[str] = []
    try:
        budget = p.deadline.stage_budget(setting("GENERATION_SECONDS"))
        for piece in generator.stream(data, budget_seconds=budget, usage=draft.usage):
            pieces.append(piece)
            if extractive or p.staff:  # a staff answer likely replaces it: held back, sent whole at the end
                continue
            text = "".join(pieces).lstrip()
            if not draft.streamed and (len(text) > len(NOT_IN_BOOK) or not NOT_IN_BOOK.startswith(text)):
                draft.streamed = True
                yield "token", {"text": text}
            elif draft.streamed:
                yield "token", {"text": piece}
        draft.answer = "".join(pieces).strip()
    except GenerationFailed as exc:
        logger.warning("generator %s failed (%s), answering extractively: %s", generator.name, exc.reason,
                       exc.message)
        draft.failure = exc
        draft.notice = wording.say(wording.MODEL_FAILED, p.language, reason=exc.message)
        draft.generator = ExtractiveGenerator.name
        draft.answer = "".join(ExtractiveGenerator().stream(data, budget_seconds=0)).strip()
    if draft.answer.startswith(NOT_IN_BOOK) or draft.answer.endswith(NOT_IN_BOOK):
        draft.answer, draft.refused = _not_covered_message(p.book, p.request.question, p.language), NOT_COVERED
    return draft


def ground(draft: Draft, chunks: list, *, crosslingual: bool = False) -> GroundingReport:
    """Whether every sentence of the answer is supported by the sources it cites (a refusal is not checked); a
    language model's answer to a cross-lingual question is judged across languages (``grounding``)."""
    if draft.refused:
        return GroundingReport()
    quoted = draft.generator == ExtractiveGenerator.name
    return check_grounding(draft.answer, [c.text for c in chunks], across_languages=crosslingual and not quoted,
                           quoted=quoted)


def assess_confidence(p: Prepared, draft: Draft, grounding: GroundingReport) -> Verdict:
    """The answer the reader gets and its outcome: a refusal stays one; an answer its sources don't support is
    withheld; else the confidence model's level decides between the answer, the answer marked unsure, and (with
    ``UNSURE_ANSWERS=refuse``) a refusal that points to the closest sections."""
    if draft.refused:
        return Verdict(draft.answer, REFUSED_AS[draft.refused], grounding, refused=draft.refused)
    if not grounding.passed:
        logger.info("answer withheld (%s): %r", grounding.reason, p.request.question[:200])
        return Verdict(wording.say(wording.WITHHELD, p.language), Outcome.WITHHELD, grounding)
    assessed = assess(ConfidenceInput(
        question=p.request.question, resolved_question=p.resolved_question, answer=draft.answer,
        chunks=p.retrieval.chunks, cited=grounding.cited_sources, scope_score=p.scope_score, threshold=p.threshold,
        calibration=p.calibration, selected_overlap=p.retrieval.best_selected_overlap,
        selected_text=p.request.selected_text, previous_answer=p.turns[-1].answer if p.follows else "",
        crosslingual=p.crosslingual))
    verdict = Verdict(draft.answer, Outcome.ANSWERED, grounding, confidence=assessed.probability,
                      level=assessed.level, features=assessed.features)
    refuse_unsure = setting("UNSURE_ANSWERS") == "refuse"
    if assessed.held_back and refuse_unsure:
        logger.info("answer held back as unsure (confidence %.3f%s): %r", assessed.probability,
                    ", navigation links only" if assessed.navigation else "", p.request.question[:200])
        verdict.draft_answer, verdict.answer = draft.answer, _unsure_message(p.book, p.request.question, p.language)
        verdict.outcome, verdict.refused, verdict.level = Outcome.HELD_BACK, UNSURE, "low"
        return verdict
    verdict.below_floor = assessed.held_back
    if p.crosslingual and draft.generator == ExtractiveGenerator.name:  # the book's words, said to be the book's
        verdict.answer = f"{wording.book_language_label(p.book_language, p.language)}\n\n{verdict.answer}"
    if assessed.level == "unsure":  # shown as what it is: the closest passage, not an answer
        prefix = wording.say(wording.UNSURE_PREFIX, p.language)
        verdict.answer, verdict.outcome = f"{prefix}\n\n{verdict.answer}", Outcome.UNSURE
    return verdict


def respond(p: Prepared, draft: Draft, verdict: Verdict, *, checks_seconds: float) -> Answer:
    """The response a reader gets (``chat.channels.responses.AnswerSerializer`` documents each field)."""
    refused, flagged, chunks = verdict.refused, verdict.flagged, p.retrieval.chunks
    suggestions = nearest_sections(p.retrieval, by_rank=refused == UNSURE) if refused or flagged else []
    cited = verdict.grounding.cited_sources
    sources = [] if refused else [source_card(n, c, verdict.answer, n in cited) for n, c in enumerate(chunks, 1)]
    return Answer(
        answer=verdict.answer,
        answer_html=render_answer(verdict.answer, sources),
        sources=sources,
        confidence=verdict.confidence,
        confidence_level=verdict.level,
        confidence_note=None if refused or flagged else wording.level_note(LEVEL_NOTES[verdict.level], p.language),
        generator=draft.generator,
        session_id=str(p.conversation.id),
        response_time_ms=p.deadline.elapsed_ms(),
        answer_id=str(p.answer_id),
        book=p.book.root.slug,
        version=p.book.version,
        locale=p.book.locale,
        refused=bool(refused),
        refusal_reason=refused,
        suggestions=suggestions,
        # The answer itself says an unsure answer is the closest passage; one below the floor, shown under
        # UNSURE_ANSWERS=answer, is said to be shakier still.
        disclaimer=wording.say(wording.LOW_CONFIDENCE, p.language) if verdict.below_floor else None,
        notice=draft.notice,
        flagged_for_review=flagged,
        grounding=verdict.grounding if not refused else None,
        resolved_question=p.resolved_question,
        retrieval=_retrieval_figures(p, draft, verdict),
        timings_ms={"retrieval": round(p.retrieval.seconds * 1000, 2), **p.retrieval.timings_ms,
                    "generation": round(draft.seconds * 1000, 2), "grounding": round(checks_seconds * 1000, 2)},
        # The language model's tokens, also when it failed and the extractive generator answered: they were spent.
        llm_usage=draft.usage.totals() if draft.usage else None,
        language=p.language,
        book_language=p.book_language,
    )


def take_over(p: Prepared, verdict: Verdict, answer: Answer) -> tuple[Verdict, Answer]:
    """The matched staff answer instead of the book's (``Outcome.STAFF``, level ``staff``), unless the book's own
    answer is high or the staff answer stopped being served since it matched; a refusal, an unsure or a withheld
    answer are replaced too. The book's answer is kept for reviewers (``draft_answer``)."""
    if p.staff is None or (verdict.outcome == Outcome.ANSWERED and verdict.level == "high"):
        return verdict, answer
    reply = staff_matching.reply_for(p.staff)
    if reply is None:
        return verdict, answer
    staff_matching.count_served(reply.id, channel=p.request.channel)
    taken = Verdict(reply.answer, Outcome.STAFF, GroundingReport(), confidence=p.staff.score,
                    level=staff_matching.LEVEL, features=verdict.features, draft_answer=verdict.answer)
    return taken, replace(
        answer, answer=reply.answer, answer_html=reply.answer_html, sources=reply.sources,
        confidence=round(p.staff.score, 4), confidence_level=staff_matching.LEVEL, confidence_note=reply.note,
        generator=staff_matching.LEVEL, refused=False, refusal_reason=None, suggestions=[], disclaimer=None,
        notice=None, flagged_for_review=False, grounding=None,
        staff_answer=StaffAnswerRef(id=reply.id, answered_at=reply.answered_at.isoformat()))


def _retrieval_figures(p: Prepared, draft: Draft, verdict: Verdict) -> RetrievalFigures:
    r = p.retrieval
    return RetrievalFigures(
        best_cosine=round(r.best_cosine, 4), scope_score=round(p.scope_score, 4), threshold=round(p.threshold, 4),
        lexical_coverage=round(r.lexical_coverage, 3), candidates=r.candidates, answerability=draft.answerability,
        confidence_features={k: round(v, 4) for k, v in verdict.features.items()})


def remember(p: Prepared, draft: Draft, verdict: Verdict, answer: Answer) -> None:
    """Keep the turn in its conversation (the answer's fields as JSON, for the chat page) and tell the audit trail
    what happened (``announcements.send_audit``)."""
    conversations.record_turn(p.conversation, question=p.request.question, resolved_question=p.resolved_question,
                              answer=verdict.answer, answer_id=p.answer_id, refused=bool(verdict.refused),
                              response=asdict(answer))
    failure = draft.failure
    send_audit(AuditRecord.of(
        p.request, outcome=verdict.outcome, answer_id=p.answer_id, book_slug=p.book.slug,
        session_id=p.conversation.id, resolved_question=p.resolved_question, answer=verdict.answer,
        draft_answer=verdict.draft_answer, generator=answer.generator,
        sources=[audited_source(asdict(s)) for s in answer.sources], suggestions=_plain(answer.suggestions),
        confidence=verdict.confidence, confidence_level=verdict.level, refused=bool(verdict.refused),
        refusal_reason=verdict.refused, flagged=verdict.flagged, grounding=_plain(answer.grounding),
        retrieval={**_plain(answer.retrieval), "language": p.language, "book_language": p.book_language},
        latency_ms=answer.response_time_ms, timings_ms=answer.timings_ms,
        llm_usage=_plain(answer.llm_usage), generation_failure=failure.reason if failure else "",
        generation_failure_message=failure.message if failure else ""))


def _plain(value):
    """A part of an answer as the JSON an audit row stores (a list of values, one value, or None)."""
    if isinstance(value, list):
        return [asdict(v) for v in value]
    return None if value is None else asdict(value)


def _unanswerable_message(book: Book, question: str, missing: list[str], language: str = "en") -> str:
    names = [f"“{name}”" for name in named_as_asked(question, missing[:3], language=language)]
    return wording.say(wording.UNANSWERABLE, language, title=book.title, names=wording.names_or(names, language),
                       question=asked_about(question, language=language))


def _unsure_message(book: Book, question: str, language: str = "en") -> str:
    return wording.say(wording.UNSURE, language, title=book.title, question=asked_about(question, language=language))


def _not_covered_message(book: Book, question: str, language: str = "en") -> str:
    return wording.say(wording.NOT_COVERED, language, title=book.title,
                       question=asked_about(question, language=language))


def asked_about(question: str, *, words: int = ASKED_WORDS, language: str = "en") -> str:
    """What the question asks, in the reader's words, to quote in a refusal: the sentences that ask (not the
    situation before them), without a greeting, at most ``words`` words, and only letters, digits and plain
    punctuation (nothing the answer's Markdown would read as a link, an emphasis or a citation)."""
    text = _GREETING.sub("", asked(question).strip()).strip()
    text = " ".join(_UNQUOTABLE.sub(" ", text).split())
    cut = text.split(" ")
    if len(cut) > words:
        text = " ".join(cut[:words]).rstrip(",;:") + "…"
    if len(text) > ASKED_CHARS:
        text = text[:ASKED_CHARS].rstrip(",;: ") + "…"
    return text or wording.say(wording.THIS, language)


def named_as_asked(question: str, terms: list[str], *, language: str = "en") -> list[str]:
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
    return out or [wording.say(wording.WHAT_IT_ASKS, language)]
