"""What the chat app tells others (the audit trail listens), and asks them, so that chat never imports them.

All are sent with ``send_robust``: a receiver that fails is logged by the sender and never
fails the answer or the vote.
"""

from __future__ import annotations

import logging
import uuid
from contextlib import contextmanager
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
    """How a question ended, in the pipeline's words: ``record["outcome"]`` of ``answered``. The audit trail maps
    each to a status of its own rows (``audit.recording.STATUS_OF``); /metrics counts them."""

    ANSWERED = "answered"  # an answer, at high or medium confidence (or below the floor, shown with a disclaimer)
    UNSURE = "unsure"  # the closest passage, shown as such
    HELD_BACK = "held_back"  # unsure, and refused instead (``UNSURE_ANSWERS=refuse``), pointing to sections
    NOT_COVERED = "not_covered"  # refused: outside the book's scope, or the language model said so
    UNANSWERABLE = "unanswerable"  # refused: the passages lack what the question names
    WITHHELD = "withheld"  # written, but not supported by the sources it cites
    TIMED_OUT = "timed_out"  # validated, then out of time
    FAILED = "failed"  # validated, then failed (a 5xx)
    SEARCHED = "searched"  # an assistant's search: passages, no answer


# A question was answered (or refused, withheld, …), failed after validation, or an assistant searched a book
# (``chat.pipeline.assistant_search``): ``record`` is a plain dict (``send_audit``) with its ``outcome``.
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
    keep = ("n", "chunk_id", "heading_path", "chapter", "section", "document", "url", "score", "cited")
    return {k: source.get(k) for k in keep}


def send_audit(request: AskRequest, **fields) -> None:
    """Tell the audit trail (``chat.pipeline.announcements.answered``); a failing receiver never fails the
    answer. A search (``chat.pipeline.assistant_search``) is told the same way, with status ``searched``."""
    if request.channel in UNAUDITED_CHANNELS:
        return
    record = {"channel": request.channel, "api_key_id": request.api_key_id, "api_key_name": request.api_key_name,
              "client_ip": request.client_ip, "question": request.question, "selected_text": request.selected_text,
              **fields}
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
    send_audit(request, answer_id=uuid.uuid4(), book_slug=book.slug if book else (request.book or ""),
                session_id=session, outcome=outcome, error_code=code, error_message=message,
                latency_ms=deadline.elapsed_ms())
