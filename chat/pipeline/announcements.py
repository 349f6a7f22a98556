"""What the chat app tells others (the audit trail listens), and asks them, so that chat never imports them.

What a question came to travels as an ``AuditRecord``: who asked, what was answered (or why not) and how it
ended (``Outcome``), one typed value from the pipeline to whoever listens to ``answered`` (the audit trail, and
/metrics). Its fields are named as the audit row's columns, which ``audit.recording`` fills from them by these
names; only the outcome (a status), the IP (a keyed hash) and why it refused (/metrics') aren't copied. Each field
has the row's own default, so a record says only what it knows.

All are sent with ``send_robust``: a receiver that fails is logged by the sender and never
fails the answer or the vote.
"""

from __future__ import annotations

import logging
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from django.dispatch import Signal

from bookchat.base.errors import BookchatError, failure
from chat.pipeline.deadline import Deadline
from chat.pipeline.questions import AskRequest

if TYPE_CHECKING:
    from ingestion.models import Book

logger = logging.getLogger(__name__)



class Outcome(StrEnum):
    """How a question ended, in the pipeline's words: an ``AuditRecord``'s ``outcome``. The audit trail maps
    each to a status of its own rows (``audit.recording.STATUS_OF``); /metrics counts them."""

    ANSWERED = "answered"  # an answer, at high or medium confidence (or below the floor, shown with a disclaimer)
    UNSURE = "unsure"  # the closest passage, shown as such
    HELD_BACK = "held_back"  # unsure, and refused instead (``UNSURE_ANSWERS=refuse``), pointing to sections
    NOT_COVERED = "not_covered"  # refused: outside the book's scope, or the language model said so
    UNANSWERABLE = "unanswerable"  # refused: the passages lack what the question names
    WITHHELD = "withheld"  # written, but not supported by the sources it cites
    STAFF = "staff"  # the course staff's answer to the same question, instead of the book's (not high) answer
    TIMED_OUT = "timed_out"  # validated, then out of time
    FAILED = "failed"  # validated, then failed (a 5xx)
    SEARCHED = "searched"  # an assistant's search: passages, no answer


@dataclass(frozen=True, kw_only=True)
class AuditRecord:
    """One question, as the audit trail keeps it: made for an answer (``answering.remember``), a failure
    (``audit_failures``) and a search (``assistant_search``, ``typeahead``). Sources, suggestions, grounding,
    retrieval figures, timings and token counts are the JSON the row stores."""

    outcome: Outcome
    answer_id: uuid.UUID  # the answer's, or the search's
    channel: str
    question: str
    selected_text: str = ""
    api_key_id: int | None = None
    api_key_name: str = ""
    client_ip: str = ""  # the row keeps a keyed hash of it, never the address
    learner: str = ""  # an LMS-launched learner's pseudonym (chat.lti)
    book_slug: str = ""
    session_id: uuid.UUID | None = None
    resolved_question: str = ""
    answer: str = ""
    draft_answer: str = ""  # an unsure answer as written, before the closest sections replaced it
    generator: str = ""
    sources: list[dict] = field(default_factory=list)  # each as ``audited_source`` keeps it
    suggestions: list[dict] = field(default_factory=list)
    confidence: float | None = None
    confidence_level: str = ""
    refused: bool = False
    refusal_reason: str | None = None  # counted by /metrics; the row's status says as much
    flagged: bool = False
    grounding: dict | None = None
    retrieval: dict = field(default_factory=dict)
    error_code: str = ""
    error_message: str = ""
    latency_ms: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)
    llm_usage: dict | None = None
    generation_failure: str = ""  # ``generation.FAILURE_REASONS``: why the book's own sentences answered
    generation_failure_message: str = ""

    @classmethod
    def of(cls, request: AskRequest, **fields) -> AuditRecord:
        """The record of ``request``: who asked it, on which channel, and what ``fields`` say."""
        return cls(channel=request.channel, api_key_id=request.api_key_id, api_key_name=request.api_key_name,
                   client_ip=request.client_ip, question=request.question, selected_text=request.selected_text,
                   learner=request.learner, **fields)


# A question was answered (or refused, withheld, …), failed after validation, or an assistant searched a book
# (``chat.pipeline.assistant_search``): ``record`` is its ``AuditRecord``.
answered = Signal()

# A reader voted on an answer: ``answer_id`` (UUID), ``rating`` ("up"/"down"), ``comment``.
feedback_given = Signal()

# A reader opened the ``n``-th section (1-based, in the order shown) of search ``search_id`` (UUID): a receiver that
# recorded it returns True (the audit trail, when that search is one of its rows, of ``book_slug`` when given).
search_opened = Signal()

# ``/api/v1/health`` asks the other parts how they are: each receiver returns ``{name: report}`` (the audit
# trail: ``{"audit": {"write_failures": …}}``), shown beside the database and embedder checks.
health_requested = Signal()

# Channels whose answers are not audited: quality evaluation asks hundreds of made-up questions.
UNAUDITED_CHANNELS = frozenset({"evaluate"})


def audited_source(source: dict) -> dict:
    """What an audit row keeps of a source or a passage found (``dataclasses.asdict`` of an answer's source): where
    it is and whether it was cited, not its text."""
    keep = ("n", "chunk_id", "heading_path", "chapter", "section", "document", "url", "score", "cited")
    return {k: source.get(k) for k in keep}


def send_audit(record: AuditRecord) -> None:
    """Tell the audit trail (``chat.pipeline.announcements.answered``); a failing receiver never fails the
    answer. A search (``chat.pipeline.assistant_search``) is told the same way, with outcome ``searched``."""
    if record.channel in UNAUDITED_CHANNELS:
        return
    for receiver, outcome in answered.send_robust(sender=AskRequest, record=record):
        if isinstance(outcome, Exception):
            logger.error("audit receiver %r failed: %s", receiver, outcome)


@contextmanager
def audit_failures(request: AskRequest, deadline: Deadline, *, book: Book | None = None, session=None):
    """Record a question that validated but then timed out or failed (answered 5xx, ``bookchat.base.errors.failure``),
    and re-raise. Client errors (unknown book or chapter) are not answers and are not recorded."""
    try:
        yield
    except Exception as exc:
        status, body = failure(exc)
        if status >= 500:
            message = exc.message if isinstance(exc, BookchatError) else f"{type(exc).__name__}: {exc}"[:500]
            _audit_failure(request, deadline, body["error"], message, book, session,
                           Outcome.TIMED_OUT if status == 504 else Outcome.FAILED)
        raise


def _audit_failure(request, deadline, code, message, book, session, outcome: Outcome) -> None:
    send_audit(AuditRecord.of(request, outcome=outcome, answer_id=uuid.uuid4(),
                              book_slug=book.slug if book else (request.book or ""), session_id=session,
                              error_code=code, error_message=message, latency_ms=deadline.elapsed_ms()))
